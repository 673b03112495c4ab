//! cuBLASLt, the reference beside the tensor-core records: a square GEMM of the same input
//! precision, loaded at run time with dlopen from wherever the machine has it (the CUDA
//! toolkit, or the copy a Python wheel such as PyTorch's `nvidia-cublas` ships), so hostbench
//! neither links nor ships it. The library's path is recorded.
//!
//! The GEMM is `D = Aᵀ·B` with A stored K×M ("TN", the layout every cuBLASLt FP8 and integer
//! kernel requires), inputs all 1 so every element of D is K exactly in its own type. D is cleared
//! before each sample, and after it the host reads back all of D, 16 MiB at a time, and checks
//! every element (`CuGemm::validate`; on an H200 the whole bf16 and f16 cases with it took 8.4 s,
//! their ratios unchanged). cuBLASLt's heuristic proposes up
//! to eight algorithms for a 32 MiB workspace and the fastest of them in a short trial is the
//! reference, as a user tuning a GEMM would pick it (the heuristic's first choice alone read
//! 770 TFLOP/s in bf16 on an H200 where PyTorch's matmul read 888 in short bursts).

use std::ffi::{c_int, c_void};
use std::path::PathBuf;

use hostbench_core::BenchError;

use crate::tensor::TensorType;

type Status = c_int;
type Handle = *mut c_void;

/// cudaDataType_t values (library_types.h).
const R_32F: c_int = 0;
const R_64F: c_int = 1;
const R_16F: c_int = 2;
const R_8I: c_int = 3;
const R_32I: c_int = 10;
const R_16BF: c_int = 14;
const R_8F_E4M3: c_int = 28;
const R_8F_E5M2: c_int = 29;
/// cublasComputeType_t values (cublas_api.h).
const COMPUTE_32F: c_int = 68;
const COMPUTE_64F: c_int = 70;
const COMPUTE_32I: c_int = 72;
const COMPUTE_32F_FAST_TF32: c_int = 77;
/// cublasLtMatmulDescAttributes_t: TRANSA, TRANSB; cublasOperation_t: N, T.
const DESC_TRANSA: c_int = 3;
const DESC_TRANSB: c_int = 4;
const OP_N: c_int = 0;
const OP_T: c_int = 1;
/// cublasLtMatmulPreferenceAttributes_t: MAX_WORKSPACE_BYTES.
const PREF_MAX_WORKSPACE: c_int = 1;
/// The workspace offered to cuBLASLt's heuristic.
pub const WORKSPACE: usize = 32 << 20;
/// How many of the heuristic's algorithms are timed; the fastest is the reference.
pub const ALGORITHMS: usize = 8;

/// cublasLtMatmulHeuristicResult_t.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Heuristic {
    pub algo: [u64; 8],
    pub workspace: usize,
    pub state: Status,
    pub waves: f32,
    reserved: [c_int; 4],
}

/// The element types of one GEMM: A, B, C = D, the compute type, the scale type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Types {
    pub a: c_int,
    pub b: c_int,
    pub c: c_int,
    pub compute: c_int,
    pub scale: c_int,
    /// What the reference multiplies, where it is not exactly the tensor record's precision.
    pub note: Option<&'static str>,
}

impl Types {
    pub fn for_tensor(t: TensorType) -> Types {
        let same = |ab, c, compute, scale| Types {
            a: ab,
            b: ab,
            c,
            compute,
            scale,
            note: None,
        };
        match t {
            TensorType::F16 => same(R_16F, R_16F, COMPUTE_32F, R_32F),
            TensorType::Bf16 => same(R_16BF, R_16BF, COMPUTE_32F, R_32F),
            TensorType::Tf32 => same(R_32F, R_32F, COMPUTE_32F_FAST_TF32, R_32F),
            TensorType::E4m3 => same(R_8F_E4M3, R_16BF, COMPUTE_32F, R_32F),
            // cuBLASLt has no e5m2 × e5m2 GEMM (e5m2 is the gradients' format, paired with
            // e4m3 weights or activations): the nearest is e5m2 A × e4m3 B.
            TensorType::E5m2 => Types {
                b: R_8F_E4M3,
                note: Some("cuBLASLt has no e5m2 x e5m2 GEMM: A is e5m2, B e4m3"),
                ..same(R_8F_E5M2, R_16BF, COMPUTE_32F, R_32F)
            },
            TensorType::I8 => same(R_8I, R_32I, COMPUTE_32I, R_32I),
            TensorType::F64 => same(R_64F, R_64F, COMPUTE_64F, R_64F),
        }
    }

    /// Bytes per element of a cudaDataType.
    pub fn bytes(ty: c_int) -> usize {
        match ty {
            R_64F => 8,
            R_32F | R_32I => 4,
            R_16F | R_16BF => 2,
            _ => 1,
        }
    }

    /// A 1 of type `ty` (A and B are filled with it), little-endian bytes.
    pub fn one(ty: c_int) -> Vec<u8> {
        Self::power_of_two(ty, 0)
    }

    /// 2^e (0 ≤ e < 31) in type `ty`, little-endian bytes: what every element of D holds when
    /// K = 2^e and every input is 1.
    pub fn power_of_two(ty: c_int, e: u32) -> Vec<u8> {
        let e = e as i64;
        match ty {
            R_64F => (((1023 + e) as u64) << 52).to_le_bytes().to_vec(),
            R_32F => (((127 + e) as u32) << 23).to_le_bytes().to_vec(),
            R_16BF => ((((127 + e) as u32) << 23) >> 16).to_le_bytes()[..2].to_vec(),
            R_16F => (((15 + e) as u16) << 10).to_le_bytes().to_vec(),
            R_8F_E4M3 => vec![((7 + e) as u8) << 3],
            R_8F_E5M2 => vec![((15 + e) as u8) << 2],
            R_32I => (1u32 << e).to_le_bytes().to_vec(),
            _ => vec![(1u32 << e) as u8],
        }
    }

    /// alpha = 1 and beta = 0 in the scale type, as the bytes cuBLASLt reads through the pointers.
    pub fn scalars(&self) -> ([u8; 8], [u8; 8]) {
        let mut one = [0u8; 8];
        let b = Self::one(self.scale);
        one[..b.len()].copy_from_slice(&b);
        (one, [0u8; 8])
    }
}

type Create = unsafe extern "C" fn(*mut Handle) -> Status;
type Destroy = unsafe extern "C" fn(Handle) -> Status;
type DescCreate = unsafe extern "C" fn(*mut Handle, c_int, c_int) -> Status;
type SetAttr = unsafe extern "C" fn(Handle, c_int, *const c_void, usize) -> Status;
type LayoutCreate = unsafe extern "C" fn(*mut Handle, c_int, u64, u64, i64) -> Status;
type PrefCreate = unsafe extern "C" fn(*mut Handle) -> Status;
type GetHeuristic = unsafe extern "C" fn(
    Handle,
    Handle,
    Handle,
    Handle,
    Handle,
    Handle,
    Handle,
    c_int,
    *mut Heuristic,
    *mut c_int,
) -> Status;
type Matmul = unsafe extern "C" fn(
    Handle,
    Handle,
    *const c_void,
    *const c_void,
    Handle,
    *const c_void,
    Handle,
    *const c_void,
    *const c_void,
    Handle,
    *mut c_void,
    Handle,
    *const [u64; 8],
    *mut c_void,
    usize,
    *mut c_void,
) -> Status;
type Version = unsafe extern "C" fn() -> usize;

/// Where cuBLASLt may be: the loader's own search first, then the toolkit's usual homes and the
/// Python wheels' copies.
fn candidates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("HOSTBENCH_CUBLASLT") {
        out.push(p.into());
    }
    for v in ["13", "12", "11"] {
        out.push(format!("libcublasLt.so.{v}").into());
    }
    let globs = [
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/lib/x86_64-linux-gnu",
    ];
    let mut dirs: Vec<PathBuf> = globs.iter().map(PathBuf::from).collect();
    // /usr/local/cuda-X.Y and Python environments' nvidia/cublas/lib.
    if let Ok(rd) = std::fs::read_dir("/usr/local") {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("cuda-") {
                dirs.push(e.path().join("targets/x86_64-linux/lib"));
                dirs.push(e.path().join("targets/sbsa-linux/lib"));
                dirs.push(e.path().join("lib64"));
            }
        }
    }
    for root in python_roots() {
        dirs.push(root.join("nvidia/cublas/lib"));
        dirs.push(root.join("nvidia/cu13/lib"));
    }
    for d in dirs {
        if let Ok(rd) = std::fs::read_dir(&d) {
            let mut libs: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("libcublasLt.so"))
                })
                .collect();
            libs.sort();
            out.extend(libs.into_iter().rev());
        }
    }
    out
}

/// site-packages of the Python environments a GPU node usually has: the interpreter's own
/// (`VIRTUAL_ENV`, `/opt/*/.venv`, `/usr/lib/python3*/`, `/usr/local/lib/python3*/`).
fn python_roots() -> Vec<PathBuf> {
    let mut bases: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
        bases.push(PathBuf::from(v).join("lib"));
    }
    if let Ok(rd) = std::fs::read_dir("/opt") {
        for e in rd.flatten() {
            bases.push(e.path().join(".venv/lib"));
            bases.push(e.path().join("lib"));
        }
    }
    bases.push("/usr/local/lib".into());
    bases.push("/usr/lib".into());
    let mut out = Vec::new();
    for b in bases {
        if let Ok(rd) = std::fs::read_dir(&b) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with("python3") {
                    out.push(e.path().join("site-packages"));
                    out.push(e.path().join("dist-packages"));
                }
            }
        }
    }
    out
}

/// How to get cuBLASLt where it is missing.
pub const HOW_TO_GET: &str = "cuBLASLt not found (libcublasLt.so.13/12/11 from the CUDA toolkit, \
     or a Python wheel's nvidia/cublas/lib; HOSTBENCH_CUBLASLT=PATH names one)";

/// A loaded cuBLASLt with one handle.
pub struct Lt {
    lib: libloading::Library,
    handle: Handle,
    pub path: String,
    pub version: String,
}

impl Lt {
    /// Load the first cuBLASLt that opens and create a handle (the current CUDA context is used).
    pub fn open() -> Result<Lt, BenchError> {
        for c in candidates() {
            // SAFETY: loading the library runs its initialisers only.
            let Ok(lib) = (unsafe { libloading::Library::new(&c) }) else {
                continue;
            };
            // SAFETY: documented cuBLASLt entry points with these signatures.
            let (version, handle) = unsafe {
                let v = lib
                    .get::<Version>(b"cublasLtGetVersion\0")
                    .map(|f| f())
                    .unwrap_or(0);
                let create = lib
                    .get::<Create>(b"cublasLtCreate\0")
                    .map_err(|e| BenchError::Failed(format!("cublasLtCreate: {e}")))?;
                let mut h: Handle = std::ptr::null_mut();
                let st = create(&mut h);
                if st != 0 {
                    return Err(BenchError::Failed(format!(
                        "cublasLtCreate returned status {st}"
                    )));
                }
                (v, h)
            };
            let path = loaded_path("libcublasLt").unwrap_or_else(|| c.display().to_string());
            return Ok(Lt {
                lib,
                handle,
                path,
                version: format!(
                    "cuBLASLt {}.{}.{}",
                    version / 10000,
                    (version / 100) % 100,
                    version % 100
                ),
            });
        }
        Err(BenchError::unsupported(HOW_TO_GET))
    }

    fn sym<T>(&self, name: &[u8]) -> Result<libloading::Symbol<'_, T>, BenchError> {
        // SAFETY: every name passed is a cuBLASLt function whose signature is `T`.
        unsafe { self.lib.get::<T>(name) }.map_err(|e| {
            BenchError::Failed(format!(
                "{}: {e}",
                String::from_utf8_lossy(name).trim_end_matches('\0')
            ))
        })
    }

    /// The descriptors and heuristic's algorithm of an n×n×n GEMM of `types`.
    pub fn plan(&self, types: &Types, n: u64) -> Result<Plan<'_>, BenchError> {
        let check = |what: &str, st: Status| {
            if st == 0 {
                Ok(())
            } else {
                Err(BenchError::Failed(format!("{what} returned status {st}")))
            }
        };
        let mut p = Plan {
            lt: self,
            desc: std::ptr::null_mut(),
            layouts: [std::ptr::null_mut(); 3],
            pref: std::ptr::null_mut(),
            algos: Vec::new(),
        };
        // SAFETY: each call gets valid out-pointers and handles created just before; `Plan`
        // destroys what was created, in its `drop`.
        unsafe {
            check(
                "cublasLtMatmulDescCreate",
                self.sym::<DescCreate>(b"cublasLtMatmulDescCreate\0")?(
                    &mut p.desc,
                    types.compute,
                    types.scale,
                ),
            )?;
            let set = self.sym::<SetAttr>(b"cublasLtMatmulDescSetAttribute\0")?;
            let (ta, tb) = (OP_T, OP_N);
            check(
                "TRANSA",
                set(p.desc, DESC_TRANSA, (&ta as *const c_int).cast(), 4),
            )?;
            check(
                "TRANSB",
                set(p.desc, DESC_TRANSB, (&tb as *const c_int).cast(), 4),
            )?;
            let layout = self.sym::<LayoutCreate>(b"cublasLtMatrixLayoutCreate\0")?;
            for (i, ty) in [types.a, types.b, types.c].into_iter().enumerate() {
                check(
                    "cublasLtMatrixLayoutCreate",
                    layout(&mut p.layouts[i], ty, n, n, n as i64),
                )?;
            }
            check(
                "cublasLtMatmulPreferenceCreate",
                self.sym::<PrefCreate>(b"cublasLtMatmulPreferenceCreate\0")?(&mut p.pref),
            )?;
            let ws = WORKSPACE as u64;
            check(
                "MAX_WORKSPACE_BYTES",
                self.sym::<SetAttr>(b"cublasLtMatmulPreferenceSetAttribute\0")?(
                    p.pref,
                    PREF_MAX_WORKSPACE,
                    (&ws as *const u64).cast(),
                    8,
                ),
            )?;
            let empty = Heuristic {
                algo: [0; 8],
                workspace: 0,
                state: 0,
                waves: 0.0,
                reserved: [0; 4],
            };
            let mut found_all = vec![empty; ALGORITHMS];
            let mut found: c_int = 0;
            let [a, b, c] = p.layouts;
            check(
                "cublasLtMatmulAlgoGetHeuristic",
                self.sym::<GetHeuristic>(b"cublasLtMatmulAlgoGetHeuristic\0")?(
                    self.handle,
                    p.desc,
                    a,
                    b,
                    c,
                    c,
                    p.pref,
                    ALGORITHMS as c_int,
                    found_all.as_mut_ptr(),
                    &mut found,
                ),
            )?;
            found_all.truncate(found.max(0) as usize);
            found_all.retain(|h| h.state == 0 && h.workspace <= WORKSPACE);
            if found_all.is_empty() {
                return Err(BenchError::unsupported(
                    "cuBLASLt has no algorithm for this precision on this device",
                ));
            }
            p.algos = found_all;
        }
        Ok(p)
    }
}

impl Drop for Lt {
    fn drop(&mut self) {
        if let Ok(d) = self.sym::<Destroy>(b"cublasLtDestroy\0") {
            // SAFETY: the handle was created in `open` and is destroyed once.
            let _ = unsafe { d(self.handle) };
        }
    }
}

/// One GEMM's descriptors and algorithm.
pub struct Plan<'a> {
    lt: &'a Lt,
    desc: Handle,
    layouts: [Handle; 3],
    pref: Handle,
    /// The heuristic's algorithms, best guess first, each with the workspace it needs.
    pub algos: Vec<Heuristic>,
}

impl Plan<'_> {
    /// Enqueue D = Aᵀ·B (C = D, beta 0) on `stream` with algorithm `which` of `algos`.
    ///
    /// # Safety
    /// `a`, `b`, `d` and `ws` are device allocations of the planned sizes (and `ws` at least
    /// `WORKSPACE` bytes), alive until the stream is synchronised; `stream` is live.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn enqueue(
        &self,
        which: usize,
        types: &Types,
        a: u64,
        b: u64,
        d: u64,
        ws: u64,
        stream: *mut c_void,
    ) -> Result<(), BenchError> {
        let (alpha, beta) = types.scalars();
        let h = self
            .algos
            .get(which)
            .ok_or_else(|| BenchError::Failed(format!("no cuBLASLt algorithm {which}")))?;
        let mm = self.lt.sym::<Matmul>(b"cublasLtMatmul\0")?;
        let [la, lb, lc] = self.layouts;
        // SAFETY: as the caller promises; the scalars live on this frame through the call (host
        // pointer mode: cuBLASLt reads them before returning).
        let st = unsafe {
            mm(
                self.lt.handle,
                self.desc,
                alpha.as_ptr().cast(),
                a as *const c_void,
                la,
                b as *const c_void,
                lb,
                beta.as_ptr().cast(),
                d as *const c_void,
                lc,
                d as *mut c_void,
                lc,
                &h.algo,
                ws as *mut c_void,
                h.workspace,
                stream,
            )
        };
        if st == 0 {
            Ok(())
        } else {
            Err(BenchError::Failed(format!(
                "cublasLtMatmul returned status {st}"
            )))
        }
    }
}

impl Drop for Plan<'_> {
    fn drop(&mut self) {
        // SAFETY: each handle was created by the matching Create call (null ones are skipped).
        unsafe {
            if let Ok(f) = self.lt.sym::<Destroy>(b"cublasLtMatmulDescDestroy\0") {
                if !self.desc.is_null() {
                    let _ = f(self.desc);
                }
            }
            if let Ok(f) = self.lt.sym::<Destroy>(b"cublasLtMatrixLayoutDestroy\0") {
                for l in self.layouts.into_iter().filter(|l| !l.is_null()) {
                    let _ = f(l);
                }
            }
            if let Ok(f) = self.lt.sym::<Destroy>(b"cublasLtMatmulPreferenceDestroy\0") {
                if !self.pref.is_null() {
                    let _ = f(self.pref);
                }
            }
        }
    }
}

/// The path of a loaded library whose file name starts with `prefix`, from /proc/self/maps.
fn loaded_path(prefix: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            std::path::Path::new(p)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_of_one_and_of_k() {
        assert_eq!(Types::one(R_16F), 0x3C00u16.to_le_bytes());
        assert_eq!(Types::one(R_16BF), 0x3F80u16.to_le_bytes());
        assert_eq!(Types::one(R_32F), 1.0f32.to_le_bytes());
        assert_eq!(Types::one(R_64F), 1.0f64.to_le_bytes());
        assert_eq!(Types::one(R_8F_E4M3), [0x38]);
        assert_eq!(Types::one(R_8F_E5M2), [0x3C]);
        assert_eq!(Types::one(R_8I), [1]);
        // 8192 = 2^13 in the output types.
        assert_eq!(Types::power_of_two(R_16F, 13), 0x7000u16.to_le_bytes());
        assert_eq!(Types::power_of_two(R_16BF, 13), 0x4600u16.to_le_bytes());
        assert_eq!(Types::power_of_two(R_32F, 13), 8192.0f32.to_le_bytes());
        assert_eq!(Types::power_of_two(R_64F, 13), 8192.0f64.to_le_bytes());
        assert_eq!(Types::power_of_two(R_32I, 13), 8192u32.to_le_bytes());
        // The tensor precisions' ones agree with the kernels' words.
        for t in TensorType::ALL {
            let ty = Types::for_tensor(t);
            if t != TensorType::F64 {
                let word = t.ones_word().to_le_bytes();
                assert_eq!(Types::one(ty.a), word[..Types::bytes(ty.a)], "{t:?}");
            }
        }
        let (alpha, beta) = Types::for_tensor(TensorType::I8).scalars();
        assert_eq!(
            (alpha[..4].to_vec(), beta),
            (1u32.to_le_bytes().to_vec(), [0; 8])
        );
    }

    #[test]
    fn without_the_library_the_reason_says_how_to_get_it() {
        if candidates().iter().any(|c| c.is_absolute() && c.exists()) {
            return;
        }
        // SAFETY (test): only tries the loader's search for the names.
        let found = [
            "libcublasLt.so.13",
            "libcublasLt.so.12",
            "libcublasLt.so.11",
        ]
        .iter()
        .any(|n| unsafe { libloading::Library::new(*n) }.is_ok());
        if !found {
            let e = Lt::open().err().expect("no cuBLASLt here");
            assert!(e.to_string().contains("cuBLASLt not found"), "{e}");
        }
    }
}
