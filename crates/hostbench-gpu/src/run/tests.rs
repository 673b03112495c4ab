//! Unit tests of `run.rs`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

use super::*;
use hostbench_core::subsystem::ReferenceScope;

fn device(backend: Backend, index: usize, name: &str, kind: &str) -> DeviceInfo {
    DeviceInfo::named(backend, index, name, kind)
}

fn names(d: &[DeviceInfo]) -> Vec<String> {
    d.iter()
        .map(|d| format!("{} {}", d.backend.name(), d.index))
        .collect()
}

#[test]
fn a_run_measures_each_gpu_once() {
    // What the H200 host listed: PoCL, NVIDIA's OpenCL view of the GPU, and CUDA's.
    let (keep, out) = each_gpu_once(vec![
        device(
            Backend::OpenCl,
            0,
            "cpu-skylake-avx512-Intel(R) Xeon(R)",
            "cpu",
        ),
        device(Backend::OpenCl, 1, "NVIDIA H200", "gpu"),
        device(Backend::Cuda, 0, "NVIDIA H200", "gpu"),
    ]);
    assert_eq!(names(&keep), ["cuda 0"]);
    let why: Vec<&str> = out.iter().map(|(_, w)| w.as_str()).collect();
    assert!(why[0].contains("cpu phase") && why[0].contains("--backend opencl --device 0"));
    assert!(why[1].contains("same GPU as cuda 0") && why[1].contains("--device 1"));

    // Two GPUs of one model pair off in order; a GPU only OpenCL sees stays.
    let (keep, out) = each_gpu_once(vec![
        device(Backend::OpenCl, 0, "NVIDIA A100", "gpu"),
        device(Backend::OpenCl, 1, "NVIDIA A100", "gpu"),
        device(Backend::OpenCl, 2, "AMD Radeon", "gpu"),
        device(Backend::Cuda, 0, "NVIDIA A100", "gpu"),
        device(Backend::Cuda, 1, "NVIDIA A100", "gpu"),
    ]);
    assert_eq!(names(&keep), ["opencl 2", "cuda 0", "cuda 1"]);
    assert!(out[0].1.contains("cuda 0") && out[1].1.contains("cuda 1"));

    // No GPU: the CPU's OpenCL device is what there is, and it runs.
    let (keep, out) = each_gpu_once(vec![device(Backend::OpenCl, 0, "pthread", "cpu")]);
    assert_eq!((names(&keep), out.len()), (vec!["opencl 0".to_string()], 0));
}

/// A device whose operations take a fixed simulated time: `secs_per_byte` for its kernels,
/// twice that for its driver's copy (so the copy kernel is 2 × the driver's).
struct Fake {
    info: DeviceInfo,
    driver: bool,
}

struct FakeOp {
    bytes: f64,
    secs_per_byte: f64,
    tool: bool,
}

impl Timed for FakeOp {
    fn run(&mut self, reps: u64) -> Result<f64, BenchError> {
        Ok(reps as f64 * self.bytes * self.secs_per_byte)
    }
    fn validate(&mut self) -> Result<(), BenchError> {
        Ok(())
    }
    fn work(&self) -> f64 {
        self.bytes
    }
    fn facts(&self) -> Vec<(String, Value)> {
        if self.tool {
            vec![
                ("tool".into(), json!("fakeMemcpy")),
                ("version".into(), json!("driver 1.0")),
            ]
        } else {
            Vec::new()
        }
    }
}

impl Session for Fake {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn compute(&mut self, _: Dtype, _: u32) -> Result<Box<dyn Timed + '_>, BenchError> {
        Err(BenchError::unsupported("no compute"))
    }
    fn memory(&mut self, _: MemKernel, block: u64) -> Result<Box<dyn Timed + '_>, BenchError> {
        Ok(Box::new(FakeOp {
            bytes: block as f64,
            secs_per_byte: 1e-9,
            tool: false,
        }))
    }
    fn transfer(
        &mut self,
        _: crate::Direction,
        _: crate::HostMemory,
        _: u64,
    ) -> Result<Box<dyn Timed + '_>, BenchError> {
        Err(BenchError::unsupported("no transfers"))
    }
    fn launch(&mut self) -> Result<Box<dyn Timed + '_>, BenchError> {
        Err(BenchError::unsupported("no launch"))
    }
    fn driver_copy(&mut self, block: u64) -> Option<Result<Box<dyn Timed + '_>, BenchError>> {
        self.driver.then(|| {
            Ok(Box::new(FakeOp {
                bytes: block as f64,
                secs_per_byte: 2e-9,
                tool: true,
            }) as Box<dyn Timed>)
        })
    }
    /// 1e15 FLOP/s in wgmma's n=256 form, half of it in the others.
    fn tensor(&mut self, _: TensorType, form: Form) -> Result<Box<dyn Timed + '_>, BenchError> {
        let fast = matches!(
            form,
            Form::Wgmma {
                n: 256,
                a_in_regs: false
            }
        );
        Ok(Box::new(FakeOp {
            bytes: 1e12,
            secs_per_byte: if fast { 1e-15 } else { 2e-15 },
            tool: false,
        }))
    }
    /// cuBLASLt at 0.8 of the fast form.
    fn gemm(&mut self, _: TensorType, _: u64) -> Option<Result<Box<dyn Timed + '_>, BenchError>> {
        self.driver.then(|| {
            Ok(Box::new(FakeOp {
                bytes: 1e12,
                secs_per_byte: 1.25e-15,
                tool: true,
            }) as Box<dyn Timed>)
        })
    }
}

fn hopper(name: &str) -> DeviceInfo {
    let mut d = device(Backend::Cuda, 0, name, "gpu");
    d.compute_units = 132;
    d.clock_hz = Some(1.98e9);
    d.facts.insert("compute_capability".into(), json!("9.0"));
    d.facts.insert("l2_bytes".into(), json!(50u64 << 20));
    d
}

#[test]
fn tensor_records_take_the_fastest_form_the_table_peak_and_cublas_beside() {
    let cfg = GpuConfig {
        compute: None,
        memory: None,
        transfer: None,
        launch: false,
        tensor: Some(crate::config::TensorConfig {
            types: vec![TensorType::Bf16, TensorType::F64],
            explicit: true,
            sweep: true,
            opencl_skips: true,
        }),
        reference: ReferenceScope::All,
        ..GpuConfig::default()
    };
    let mut runner = Runner::new(
        hostbench_core::RunnerConfig::quiet(2),
        hostbench_core::model::Host::default(),
    );
    let mut s = Fake {
        info: hopper("NVIDIA H200"),
        driver: true,
    };
    run_device(&mut runner, &cfg, &mut s).expect("run");
    let run = runner.finish().expect("finish");
    let bf16 = run
        .records
        .iter()
        .find(|r| r.params["dtype"] == "bf16")
        .expect("bf16 record");
    assert_eq!(bf16.params["unit"], "tensor");
    assert_eq!(bf16.benchmark, "gpu.flops");
    // The sweep kept the fast form, and every form tried is in the record.
    assert!((bf16.value - 1e15).abs() < 1e9, "{}", bf16.value);
    let sweep = bf16.extra["form_sweep"].as_object().expect("sweep");
    assert_eq!(sweep.len(), 4, "{sweep:?}");
    // No NVML here: the peak is at the clock attribute, and its basis says so.
    let peak = bf16.peak.as_ref().expect("peak");
    assert!((peak.value - 132.0 * 1.98e9 * 2048.0 * 2.0).abs() < 1e6);
    assert!(
        peak.basis.contains("CU_DEVICE_ATTRIBUTE_CLOCK_RATE"),
        "{}",
        peak.basis
    );
    assert!(peak.basis.contains("2048 dense bf16 tensor MACs/SM/clock"));
    let r = bf16.reference.as_ref().expect("cuBLASLt beside");
    assert!((r.ratio - 1.25).abs() < 1e-9, "{}", r.ratio);
    // f64 on Hopper runs mma.sync forms.
    let f64r = run
        .records
        .iter()
        .find(|r| r.params["dtype"] == "f64")
        .expect("f64 record");
    assert!(f64r.extra["form_sweep"]
        .as_object()
        .expect("sweep")
        .keys()
        .all(|k| k.starts_with("mma.sync")));
    // A device of another generation: a precision it lacks is a skip with the reason.
    let mut runner = Runner::new(
        hostbench_core::RunnerConfig::quiet(2),
        hostbench_core::model::Host::default(),
    );
    let mut ampere = hopper("NVIDIA A40");
    ampere
        .facts
        .insert("compute_capability".into(), json!("8.6"));
    let mut s = Fake {
        info: ampere,
        driver: false,
    };
    run_device(&mut runner, &cfg, &mut s).expect("run");
    let run = runner.finish().expect("finish");
    assert_eq!(run.skipped.len(), 1, "{:?}", run.skipped);
    assert!(
        run.skipped[0].reason.contains("no f64 inputs"),
        "{}",
        run.skipped[0].reason
    );
    // In a run's default list the same precision is left out with the reason: the run on
    // that GPU is complete.
    let mut quiet = cfg.clone();
    if let Some(t) = quiet.tensor.as_mut() {
        t.explicit = false;
    }
    let mut runner = Runner::new(
        hostbench_core::RunnerConfig::quiet(2),
        hostbench_core::model::Host::default(),
    );
    run_device(&mut runner, &quiet, &mut s).expect("run");
    let run = runner.finish().expect("finish");
    assert!(run.skipped.is_empty(), "{:?}", run.skipped);
    assert_eq!(run.left_out.len(), 1, "{:?}", run.left_out);
    assert_eq!(run.left_out[0].what, "cuda 0 f64 tensor");
}

#[test]
fn opencl_devices_get_tensor_skips_only_when_asked_and_no_cuda_device_is_measured() {
    let mut cfg = GpuConfig::default();
    let ocl = device(Backend::OpenCl, 0, "pocl", "cpu");
    let cuda = hopper("H200");
    // By default (a run, `hostbench gpu`): CUDA devices only.
    assert!(tensor_types(&cfg, &ocl).is_empty());
    assert_eq!(tensor_types(&cfg, &cuda).len(), TensorType::ALL.len());
    // Asked for by name: a skip each on OpenCL, unless a CUDA device is measured too.
    if let Some(t) = cfg.tensor.as_mut() {
        t.explicit = true;
    }
    assert_eq!(tensor_types(&cfg, &ocl).len(), TensorType::ALL.len());
    if let Some(t) = cfg.tensor.as_mut() {
        t.opencl_skips = false;
    }
    assert!(tensor_types(&cfg, &ocl).is_empty());
}

#[test]
fn blocks_that_fit_in_the_l2_are_labelled_l2() {
    let mut d = device(Backend::Cuda, 0, "H200", "gpu");
    assert!(memory_level(&d, MemKernel::Read, 16 << 20).is_none());
    d.facts.insert("l2_bytes".into(), json!(50u64 << 20));
    let (level, why) = memory_level(&d, MemKernel::Read, 16 << 20).expect("level");
    assert_eq!(level, "L2");
    assert!(why.contains("not a wrong basis"), "{why}");
    // A copy's working set is its source and its destination.
    assert_eq!(
        memory_level(&d, MemKernel::Copy, 32 << 20).map(|l| l.0),
        Some("DRAM")
    );
    assert_eq!(
        memory_level(&d, MemKernel::Write, 32 << 20).map(|l| l.0),
        Some("L2")
    );
    assert_eq!(
        memory_level(&d, MemKernel::Read, 256 << 20).map(|l| l.0),
        Some("DRAM")
    );
}

fn copy_refs(driver: bool, scope: ReferenceScope) -> Vec<(String, u64, Option<f64>, bool)> {
    let cfg = GpuConfig {
        compute: None,
        transfer: None,
        launch: false,
        memory: Some(crate::config::MemoryConfig {
            kernels: vec![MemKernel::Read, MemKernel::Copy],
            blocks: vec![1 << 10, 1 << 20],
        }),
        duration: std::time::Duration::from_millis(1),
        reference: scope,
        ..GpuConfig::default()
    };
    let mut runner = Runner::new(
        hostbench_core::RunnerConfig::quiet(2),
        hostbench_core::model::Host::default(),
    );
    let mut s = Fake {
        info: device(Backend::Cuda, 0, "fake", "gpu"),
        driver,
    };
    run_device(&mut runner, &cfg, &mut s).unwrap();
    let run = runner.finish().unwrap();
    run.records
        .iter()
        .map(|r| {
            (
                r.params["kind"].as_str().unwrap().to_string(),
                r.params["block_bytes"].as_u64().unwrap(),
                r.reference.as_ref().map(|x| x.ratio),
                r.reference
                    .as_ref()
                    .is_some_and(|x| x.tool == "fakeMemcpy" && x.version == "driver 1.0"),
            )
        })
        .collect()
}

#[test]
fn a_run_asks_clpeak_beside_a_gpus_headline_and_not_beside_a_cpu_device() {
    let cfg = |scope| GpuConfig {
        reference: scope,
        ..crate::subsystem::profile_config(hostbench_core::subsystem::Profile::Standard)
    };
    let gpu = device(Backend::OpenCl, 1, "AMD Radeon", "gpu");
    let cpu = device(Backend::OpenCl, 0, "cpu-skylake-avx512", "cpu");
    // A GPU: the global bandwidth, beside the read kernel at the largest block.
    assert_eq!(
        clpeak_tests(&cfg(ReferenceScope::Headline), &gpu),
        [Test::GlobalBandwidth]
    );
    // A CPU device in a run: none (its headline read is a cache-resident block).
    assert!(clpeak_tests(&cfg(ReferenceScope::Headline), &cpu).is_empty());
    // Asked for every case, both get every test their dtypes have.
    for d in [&gpu, &cpu] {
        let all = clpeak_tests(&cfg(ReferenceScope::All), d);
        assert!(
            all.contains(&Test::GlobalBandwidth) && all.contains(&Test::ComputeSp),
            "{all:?}"
        );
    }
    assert!(clpeak_tests(&cfg(ReferenceScope::Off), &gpu).is_empty());
}

#[test]
fn the_driver_copy_stands_beside_the_copy_kernel() {
    // Every copy case gets the driver's copy, measured the same way and counted read +
    // write as the kernel is: the kernel is simulated twice as fast, so the ratio is 2.
    let all = copy_refs(true, ReferenceScope::All);
    assert_eq!(all.len(), 4);
    for (kind, _, ratio, named) in &all {
        if kind == "copy" {
            assert!((ratio.unwrap() - 2.0).abs() < 1e-9 && *named, "{all:?}");
        } else {
            assert_eq!(*ratio, None, "{all:?}");
        }
    }
    // The headline scope (a run's default): the largest copy block only.
    let headline = copy_refs(true, ReferenceScope::Headline);
    let with: Vec<(String, u64)> = headline
        .iter()
        .filter(|r| r.2.is_some())
        .map(|r| (r.0.clone(), r.1))
        .collect();
    assert_eq!(with, [("copy".to_string(), 1 << 20)]);
    // Off, or a backend without a copy of its own: nothing beside it.
    assert!(copy_refs(true, ReferenceScope::Off)
        .iter()
        .all(|r| r.2.is_none()));
    assert!(copy_refs(false, ReferenceScope::All)
        .iter()
        .all(|r| r.2.is_none()));
}
