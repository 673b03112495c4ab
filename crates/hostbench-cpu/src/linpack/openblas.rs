//! OpenBLAS beside the solve (`linpack --reference`): LAPACK's `dgesv` (LU with partial pivoting
//! and the solve, `dgetrf` + `dgetrs`) from the system's OpenBLAS, loaded at run time (no
//! link-time dependency: the binary runs where OpenBLAS is absent, and says so), on the very
//! system hostbench solved (same generator, seed and `n`), on the same number of threads
//! (`openblas_set_num_threads`), timed the same way (the factorisation and solve only) and
//! checked with the same HPL scaled residual, which must pass for the figure to count.

use std::ffi::{c_char, c_int, CStr};
use std::time::Instant;

use hostbench_core::BenchError;

use super::system::{hpl_flops, original, scaled_residual, LinpackConfig, THRESHOLD};

/// Library names tried, Debian's first (`libopenblas0` and its pthread variant).
const SONAMES: [&str; 2] = ["libopenblas.so.0", "libopenblas.so"];

type Dgesv = unsafe extern "C" fn(
    n: *const c_int,
    nrhs: *const c_int,
    a: *mut f64,
    lda: *const c_int,
    ipiv: *mut c_int,
    b: *mut f64,
    ldb: *const c_int,
    info: *mut c_int,
);
type SetThreads = unsafe extern "C" fn(c_int);
type GetConfig = unsafe extern "C" fn() -> *const c_char;

/// One timed OpenBLAS solve.
#[derive(Debug, Clone, Copy)]
pub struct OpenBlasRun {
    pub seconds: f64,
    pub flops: f64,
    pub residual: f64,
}

/// The loaded library.
pub struct OpenBlas {
    lib: libloading::Library,
}

impl OpenBlas {
    /// Load the system's OpenBLAS; its absence is `Unsupported` (a note, never a failure).
    pub fn load() -> Result<Self, BenchError> {
        for name in SONAMES {
            // SAFETY: loading a shared library runs its constructors; OpenBLAS's only set up its
            // thread pool and CPU detection.
            if let Ok(lib) = unsafe { libloading::Library::new(name) } {
                return Ok(Self { lib });
            }
        }
        Err(BenchError::unsupported(
            "OpenBLAS not installed: apt install libopenblas0",
        ))
    }

    /// `openblas_get_config()`, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64".
    pub fn version(&self) -> String {
        // SAFETY: the symbol has this signature in every OpenBLAS; it returns a static string.
        let config = unsafe {
            self.lib
                .get::<GetConfig>(b"openblas_get_config\0")
                .ok()
                .map(|f| f())
                .filter(|p| !p.is_null())
                .map(|p| CStr::from_ptr(p).to_string_lossy().into_owned())
        };
        config.unwrap_or_else(|| "unknown".into())
    }

    /// Solve `cfg`'s system with `dgesv` on `cfg.threads` threads.
    pub fn solve(&self, cfg: &LinpackConfig) -> Result<OpenBlasRun, BenchError> {
        if cfg.n == 0 {
            return Err(BenchError::invalid("linpack n must be at least 1, got 0"));
        }
        let (a0, b) = original(cfg)?;
        let n = cfg.n;
        let n_i = c_int::try_from(n)
            .map_err(|_| BenchError::invalid(format!("OpenBLAS: n {n} exceeds its 32-bit API")))?;
        let threads = c_int::try_from(cfg.threads).unwrap_or(c_int::MAX);
        // SAFETY: the LAPACK Fortran ABI of dgesv_ and OpenBLAS's own thread setter.
        let (dgesv, set_threads) = unsafe {
            (
                self.lib
                    .get::<Dgesv>(b"dgesv_\0")
                    .map_err(|e| BenchError::unsupported(format!("OpenBLAS has no dgesv_: {e}")))?,
                self.lib
                    .get::<SetThreads>(b"openblas_set_num_threads\0")
                    .ok(),
            )
        };
        // The original A is column-major, as LAPACK wants it; factor a copy.
        let mut a = a0.clone();
        let mut x = b.clone();
        let mut ipiv = vec![0 as c_int; n];
        let (one, mut info) = (1 as c_int, 0 as c_int);
        if let Some(f) = set_threads {
            // SAFETY: plain setter, any positive count.
            unsafe { f(threads) };
        }
        let t0 = Instant::now();
        // SAFETY: a is n×n column-major (lda = n), x has n rows (ldb = n, one right-hand side),
        // ipiv has n entries; all live for the call.
        unsafe {
            dgesv(
                &n_i,
                &one,
                a.as_mut_ptr(),
                &n_i,
                ipiv.as_mut_ptr(),
                x.as_mut_ptr(),
                &n_i,
                &mut info,
            );
        }
        let seconds = t0.elapsed().as_secs_f64();
        if info != 0 {
            return Err(BenchError::Failed(format!(
                "OpenBLAS dgesv returned info {info} (singular or bad argument)"
            )));
        }
        let residual = scaled_residual(&a0, n, &x, &b);
        if residual >= THRESHOLD {
            return Err(BenchError::Validation(format!(
                "OpenBLAS's scaled residual {residual:.3e} is not below {THRESHOLD}"
            )));
        }
        Ok(OpenBlasRun {
            seconds,
            flops: hpl_flops(n),
            residual,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openblas_solves_the_same_system_when_installed() {
        let Ok(blas) = OpenBlas::load() else {
            return;
        };
        let cfg = LinpackConfig {
            n: 300,
            threads: 1,
            seed: 7,
        };
        let r = blas.solve(&cfg).expect("solve");
        assert!(r.residual < THRESHOLD && r.seconds > 0.0);
        assert_eq!(r.flops, hpl_flops(300));
        assert!(blas.version().contains("OpenBLAS"), "{}", blas.version());
    }
}
