//! A GPU's clock held by its power cap or for temperature as causes of a record's shortfall
//! (`power_cap`, `thermal`): the gpu subsystem's answer to `Subsystem::causes`.
//!
//! The readings are NVML's, which this crate samples into the record's `conditions.gpu`; what
//! its clock reasons mean is read here and handed to core's diagnosis, which ranks these with
//! the other conditions (issue 53: subsystems own their causes).

use hostbench_core::model::{Cause, Diagnosis, GpuConditions, Record};

/// Both causes the record's GPU readings show, power cap first (the order their ties keep).
pub fn gpu_causes(rec: &Record) -> Vec<Diagnosis> {
    let Some(g) = rec.conditions.as_ref().and_then(|c| c.gpu.as_ref()) else {
        return Vec::new();
    };
    [power_cap(g), thermal(g)].into_iter().flatten().collect()
}

/// A GPU clock held with NVML's power-cap reason set.
fn power_cap(g: &GpuConditions) -> Option<Diagnosis> {
    let capped = g
        .clock_reasons
        .iter()
        .any(|r| r == "sw_power_cap" || r == "hw_power_brake");
    if !capped {
        return None;
    }
    // The share of the clock the cap took, against the device's maximum.
    let share = match (g.sm_clock_hz, g.sm_clock_max_hz) {
        (Some(now), Some(max)) if max > 0.0 && now < max => 1.0 - now / max,
        _ => 0.0,
    };
    let clock = g
        .sm_clock_hz
        .map_or("a lower clock".into(), |h| format!("{:.0} MHz", h / 1e6));
    // NVML sets the reason for the power management's clock decisions, and its power
    // reading (after the sample, an average over its own window) can sit far below
    // the limit while the reason is set (an H200 under tensor load read 262 W of
    // 700 W): say what was read rather than that the cap held the clock.
    let text = match (g.power_avg_w.or(g.power_w), g.power_limit_w) {
        (Some(p), Some(l)) if p >= 0.9 * l => {
            format!("GPU clock held at {clock} by its power cap ({p:.0} W of {l:.0} W)")
        }
        (Some(p), Some(l)) => format!(
            "GPU clock at {clock} with NVML's power-cap reason set ({p:.0} W of \
             {l:.0} W over the samples)"
        ),
        _ => format!("GPU clock held at {clock} by its power cap"),
    };
    Some(Diagnosis::new(Cause::PowerCap, share, text))
}

/// A GPU clock held down for temperature.
fn thermal(g: &GpuConditions) -> Option<Diagnosis> {
    g.clock_reasons
        .iter()
        .any(|r| r == "sw_thermal" || r == "hw_thermal")
        .then(|| {
            Diagnosis::new(
                Cause::Thermal,
                0.0,
                format!(
                    "GPU clock held down for temperature{}",
                    g.temperature_c
                        .map_or(String::new(), |t| format!(" ({t:.0} °C)"))
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use hostbench_core::conditions::diagnose::testdata::{diagnose_as_committed, quiet, short};
    use hostbench_core::model::{Metric, Record};
    use hostbench_core::runner::{record_from_samples, Case};

    /// What the runner does at commit: this subsystem's causes, then the diagnosis.
    fn diagnose(r: &mut Record) {
        diagnose_as_committed(r, &crate::Gpu);
    }

    #[test]
    fn a_gpu_held_by_its_power_cap_is_named_with_the_clock_it_held() {
        let mut c = quiet();
        c.gpu = Some(hostbench_core::model::GpuConditions {
            sm_clock_hz: Some(1410e6),
            sm_clock_max_hz: Some(1980e6),
            power_w: Some(699.0),
            power_limit_w: Some(700.0),
            clock_reasons: vec!["sw_power_cap".into()],
            ..Default::default()
        });
        let case = Case::new("gpu.flops", Metric::Throughput, "FLOP/s").param("dtype", "f32");
        let r = record_from_samples(&case, vec![1e12; 3]);
        let mut r = short(r, c);
        diagnose(&mut r);
        let d = &r.diagnosis[0];
        assert_eq!(d.cause, "power_cap");
        assert_eq!(
            d.text,
            "GPU clock held at 1410 MHz by its power cap (699 W of 700 W)"
        );
        assert!((d.share - (1.0 - 1410.0 / 1980.0)).abs() < 1e-9);
    }

    /// `check`'s judge re-diagnoses copies of the committed records with core alone: the
    /// power cap found here still decides that a software cap is no fault of the node
    /// (unknown), while the hardware brake fails it.
    #[test]
    fn check_judges_a_capped_gpu_by_the_cause_found_at_commit() {
        use hostbench_core::check::judge::{figure, Yardstick};
        use hostbench_core::check::Verdict;
        let floor = Yardstick {
            bound: 1.8e12,
            at_least: true,
            source: "expect nd.toml:9".into(),
        };
        for (reason, want) in [
            ("sw_power_cap", Verdict::Unknown),
            ("hw_power_brake", Verdict::Fail),
        ] {
            let mut c = quiet();
            c.gpu = Some(hostbench_core::model::GpuConditions {
                sm_clock_hz: Some(1200e6),
                sm_clock_max_hz: Some(1980e6),
                clock_reasons: vec![reason.into()],
                ..Default::default()
            });
            let case = Case::new("gpu.flops", Metric::Throughput, "FLOP/s").param("dtype", "f32");
            let mut r = short(record_from_samples(&case, vec![1e12; 3]), c);
            diagnose(&mut r);
            let c = figure(
                &r,
                Some(&r),
                &floor,
                &hostbench_core::model::Host::default(),
            );
            assert_eq!(c.verdict, want, "{reason}: {}", c.reason);
        }
    }
}
