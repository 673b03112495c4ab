//! OpenBLAS beside the solve (`linpack --reference`): LAPACK's `dgetrf` and `dgetrs` (LU with
//! partial pivoting, then the solve: what `dgesv` does, and what SciPy's `lu_factor` and
//! `lu_solve` call) from an OpenBLAS loaded at run time (no link-time
//! dependency: the binary runs where OpenBLAS is absent, and says so), on the very system
//! hostbench solved (same generator, seed and `n`), on the same number of threads
//! (`openblas_set_num_threads`), timed the same way (the factorisation and solve only) and
//! checked with the same HPL scaled residual, which must pass for the figure to count.
//!
//! A reference is only worth its ratio if it ran the kernels this CPU deserves. OpenBLAS's
//! DYNAMIC_ARCH picks a core type at load time, and a release older than the CPU falls back to
//! generic ones (an Emerald Rapids under OpenBLAS 0.3.21 ran "Prescott"-class kernels, and
//! hostbench read 5.29 × it). So the core type each library ran is named
//! (`openblas_get_corename`); where it is below what the CPU supports, the library is loaded a
//! second time with `OPENBLAS_CORETYPE` set to the right core (OpenBLAS reads it only while it
//! loads, so a copy of the file is loaded: the dynamic linker would hand back the first instance
//! for the same file); and an OpenBLAS that a Python wheel bundles (numpy's or SciPy's
//! `scipy_openblas`, often newer than the system's) is tried too. The best of them is the
//! reference, named. BLIS is not among them: it has no LAPACK, so no `dgetrf`.
//!
//! `dgetrf` + `dgetrs` rather than `dgesv` itself: SciPy's bundled OpenBLAS 0.3.30 (the LP64
//! `scipy_openblas32`) ran its `dgesv` at 47 GFLOP/s on two Zen 4 threads where its `dgetrf`
//! ran at 86, so `dgesv` understated the library that a SciPy user's `lu_factor` runs.

use std::ffi::{c_char, c_int, CStr};
use std::path::{Path, PathBuf};
use std::time::Instant;

use hostbench_core::BenchError;

use super::system::{hpl_flops, original, scaled_residual, LinpackConfig, THRESHOLD};

/// Library names tried for the system's OpenBLAS, Debian's first (`libopenblas0` and its
/// pthread variant).
const SONAMES: [&str; 2] = ["libopenblas.so.0", "libopenblas.so"];

type SetThreads32 = unsafe extern "C" fn(c_int);
type SetThreads64 = unsafe extern "C" fn(i64);
type GetString = unsafe extern "C" fn() -> *const c_char;

/// One timed OpenBLAS solve.
#[derive(Debug, Clone, Copy)]
pub struct OpenBlasRun {
    pub seconds: f64,
    pub flops: f64,
    pub residual: f64,
}

/// How a build names its entry points: Debian's plain LP64 names, or a Python wheel's
/// (`scipy_` prefix; `64_` suffix and 64-bit integers for the ILP64 builds numpy bundles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbols {
    pub prefix: &'static str,
    pub suffix: &'static str,
}

impl Symbols {
    const ALL: [Symbols; 4] = [
        Symbols {
            prefix: "",
            suffix: "",
        },
        Symbols {
            prefix: "scipy_",
            suffix: "64_",
        },
        Symbols {
            prefix: "",
            suffix: "64_",
        },
        Symbols {
            prefix: "scipy_",
            suffix: "",
        },
    ];

    /// `name` as this build exports it, NUL-terminated (`dgesv_` → `scipy_dgesv_64_`).
    fn name(self, name: &str) -> Vec<u8> {
        format!("{}{name}{}\0", self.prefix, self.suffix).into_bytes()
    }

    /// 64-bit integers (ILP64) in the LAPACK and thread-count interfaces.
    fn ilp64(self) -> bool {
        self.suffix == "64_"
    }
}

/// The loaded library.
pub struct OpenBlas {
    lib: libloading::Library,
    symbols: Symbols,
    /// Where it came from, for the record ("system libopenblas.so.0", "numpy.libs/…").
    pub origin: String,
    /// The file it was loaded from (the original, also for a forced copy).
    pub path: PathBuf,
    /// `OPENBLAS_CORETYPE` this instance was loaded with by hostbench, if any.
    pub forced: Option<String>,
}

impl OpenBlas {
    /// Load the system's OpenBLAS; its absence is `Unsupported` (a note, never a failure).
    pub fn load() -> Result<Self, BenchError> {
        for name in SONAMES {
            // SAFETY: loading a shared library runs its constructors; OpenBLAS's only set up its
            // thread pool and CPU detection.
            if let Ok(lib) = unsafe { libloading::Library::new(name) } {
                return Self::with_symbols(lib, format!("system {name}"), PathBuf::from(name));
            }
        }
        Err(BenchError::unsupported(
            "OpenBLAS not installed: apt install libopenblas0",
        ))
    }

    /// Load the OpenBLAS at `path` (a wheel's, whatever its symbol names).
    pub fn load_path(path: &Path, origin: String) -> Result<Self, BenchError> {
        // SAFETY: as in `load`.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| BenchError::unsupported(format!("{}: {e}", path.display())))?;
        Self::with_symbols(lib, origin, path.to_path_buf())
    }

    fn with_symbols(
        lib: libloading::Library,
        origin: String,
        path: PathBuf,
    ) -> Result<Self, BenchError> {
        let symbols = Symbols::ALL
            .into_iter()
            // SAFETY: only looks the symbol up.
            .find(|s| unsafe { lib.get::<*const ()>(s.name("dgetrf_").as_slice()) }.is_ok())
            .ok_or_else(|| BenchError::unsupported(format!("{origin}: no dgetrf_")))?;
        Ok(Self {
            lib,
            symbols,
            origin,
            path,
            forced: None,
        })
    }

    /// Load another instance of this library with `OPENBLAS_CORETYPE=core`: a copy of the file
    /// in the temporary directory (the same file would give back this instance, already
    /// initialised), loaded with the variable set and removed again. `None` where OpenBLAS did
    /// not take the core (a release that does not know it falls back to its own detection).
    pub fn load_forced(&self, core: &str) -> Result<Option<Self>, BenchError> {
        let src = resolve_soname(&self.path);
        let copy = std::env::temp_dir().join(format!(
            "hostbench-{}-{core}-{}",
            std::process::id(),
            src.file_name()
                .map_or("libopenblas.so".into(), |f| f.to_string_lossy())
        ));
        std::fs::copy(&src, &copy).map_err(|e| {
            BenchError::Failed(format!(
                "copying {} for OPENBLAS_CORETYPE: {e}",
                src.display()
            ))
        })?;
        let before = std::env::var_os("OPENBLAS_CORETYPE");
        // OpenBLAS reads the variable in its load-time constructor, nowhere else. The solve's
        // worker threads have ended by now; nothing else in hostbench reads the environment
        // while this runs.
        std::env::set_var("OPENBLAS_CORETYPE", core);
        // SAFETY: as in `load`.
        let loaded = unsafe { libloading::Library::new(&copy) };
        match before {
            Some(v) => std::env::set_var("OPENBLAS_CORETYPE", v),
            None => std::env::remove_var("OPENBLAS_CORETYPE"),
        }
        // The mapping stays valid once loaded; the file is not needed any more.
        let _ = std::fs::remove_file(&copy);
        let lib = loaded.map_err(|e| BenchError::Failed(format!("{}: {e}", copy.display())))?;
        let mut forced = Self::with_symbols(lib, self.origin.clone(), self.path.clone())?;
        forced.forced = Some(core.to_string());
        let took = forced
            .corename()
            .is_some_and(|c| c.eq_ignore_ascii_case(core));
        Ok(took.then_some(forced))
    }

    fn string(&self, name: &str) -> Option<String> {
        // SAFETY: these OpenBLAS symbols take nothing and return a static C string.
        unsafe {
            self.lib
                .get::<GetString>(self.symbols.name(name).as_slice())
                .ok()
                .map(|f| f())
                .filter(|p| !p.is_null())
                .map(|p| CStr::from_ptr(p).to_string_lossy().trim().to_string())
        }
    }

    /// `openblas_get_config()`, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64".
    pub fn version(&self) -> String {
        self.string("openblas_get_config")
            .unwrap_or_else(|| "unknown".into())
    }

    /// `openblas_get_corename()`: the core type whose kernels this instance runs ("SkylakeX",
    /// "Zen", "Prescott"…).
    pub fn corename(&self) -> Option<String> {
        self.string("openblas_get_corename")
    }

    /// What the record calls this library: its configuration, core and origin.
    pub fn describe(&self) -> String {
        let core = self.corename().unwrap_or_else(|| "unknown".into());
        let forced = self
            .forced
            .as_ref()
            .map_or(String::new(), |c| format!(" (OPENBLAS_CORETYPE={c})"));
        format!("{}; core {core}{forced}; {}", self.version(), self.origin)
    }

    /// Solve `cfg`'s system with `dgetrf` and `dgetrs` on `cfg.threads` threads.
    pub fn solve(&self, cfg: &LinpackConfig) -> Result<OpenBlasRun, BenchError> {
        if cfg.n == 0 {
            return Err(BenchError::invalid("linpack n must be at least 1, got 0"));
        }
        if self.symbols.ilp64() {
            self.solve_as::<i64>(cfg)
        } else {
            self.solve_as::<c_int>(cfg)
        }
    }

    fn solve_as<I: LapackInt>(&self, cfg: &LinpackConfig) -> Result<OpenBlasRun, BenchError> {
        let (a0, b) = original(cfg)?;
        let n = cfg.n;
        let n_i = I::try_from(n).map_err(|_| {
            BenchError::invalid(format!("OpenBLAS: n {n} exceeds its integer interface"))
        })?;
        type Dgetrf<I> = unsafe extern "C" fn(
            m: *const I,
            n: *const I,
            a: *mut f64,
            lda: *const I,
            ipiv: *mut I,
            info: *mut I,
        );
        // The Fortran ABI's hidden length of `trans` last (OpenBLAS's own C `dgetrs_` has no
        // such argument and ignores it).
        type Dgetrs<I> = unsafe extern "C" fn(
            trans: *const c_char,
            n: *const I,
            nrhs: *const I,
            a: *const f64,
            lda: *const I,
            ipiv: *const I,
            b: *mut f64,
            ldb: *const I,
            info: *mut I,
            trans_len: usize,
        );
        // SAFETY: the LAPACK Fortran ABI of dgetrf_ and dgetrs_ with this build's integer width.
        let (dgetrf, dgetrs) = unsafe {
            (
                self.lib
                    .get::<Dgetrf<I>>(self.symbols.name("dgetrf_").as_slice()),
                self.lib
                    .get::<Dgetrs<I>>(self.symbols.name("dgetrs_").as_slice()),
            )
        };
        let missing = |e: libloading::Error| {
            BenchError::unsupported(format!("OpenBLAS has no dgetrf_/dgetrs_: {e}"))
        };
        let (dgetrf, dgetrs) = (dgetrf.map_err(missing)?, dgetrs.map_err(missing)?);
        self.set_threads(cfg.threads);
        // The original A is column-major, as LAPACK wants it; factor a copy.
        let mut a = a0.clone();
        let mut x = b.clone();
        let mut ipiv = vec![I::ZERO; n];
        let (one, mut info, mut info_s) = (I::ONE, I::ZERO, I::ZERO);
        let trans = b'N' as c_char;
        let t0 = Instant::now();
        // SAFETY: a is n×n column-major (lda = n), x has n rows (ldb = n, one right-hand side),
        // ipiv has n entries; all live for the calls. The solve runs only on a factorisation
        // that succeeded.
        unsafe {
            dgetrf(
                &n_i,
                &n_i,
                a.as_mut_ptr(),
                &n_i,
                ipiv.as_mut_ptr(),
                &mut info,
            );
            if info == I::ZERO {
                dgetrs(
                    &trans,
                    &n_i,
                    &one,
                    a.as_ptr(),
                    &n_i,
                    ipiv.as_ptr(),
                    x.as_mut_ptr(),
                    &n_i,
                    &mut info_s,
                    1,
                );
            }
        }
        let seconds = t0.elapsed().as_secs_f64();
        if info != I::ZERO || info_s != I::ZERO {
            return Err(BenchError::Failed(format!(
                "OpenBLAS dgetrf/dgetrs returned info {info:?}/{info_s:?} (singular or bad \
                 argument)"
            )));
        }
        let residual = scaled_residual(&a0, n, &x, &b, cfg.threads);
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

    fn set_threads(&self, threads: usize) {
        let name = self.symbols.name("openblas_set_num_threads");
        // SAFETY: OpenBLAS's own thread setter, any positive count, with this build's integer.
        unsafe {
            if self.symbols.ilp64() {
                if let Ok(f) = self.lib.get::<SetThreads64>(name.as_slice()) {
                    f(i64::try_from(threads).unwrap_or(i64::MAX));
                }
            } else if let Ok(f) = self.lib.get::<SetThreads32>(name.as_slice()) {
                f(c_int::try_from(threads).unwrap_or(c_int::MAX));
            }
        }
    }
}

/// The integer type of a LAPACK interface (LP64 `int` or ILP64 `int64_t`).
trait LapackInt: Copy + PartialEq + std::fmt::Debug + TryFrom<usize> {
    const ZERO: Self;
    const ONE: Self;
}
impl LapackInt for c_int {
    const ZERO: Self = 0;
    const ONE: Self = 1;
}
impl LapackInt for i64 {
    const ZERO: Self = 0;
    const ONE: Self = 1;
}

/// A soname (`libopenblas.so.0`) as the file the dynamic linker would load; a path as given.
fn resolve_soname(path: &Path) -> PathBuf {
    if path.components().count() > 1 {
        return path.to_path_buf();
    }
    let dirs = [
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
    ];
    dirs.iter()
        .map(|d| Path::new(d).join(path))
        .find(|p| p.exists())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .unwrap_or_else(|| path.to_path_buf())
}

// ---------------------------------------------------------------------------------------------
// Which core is right

/// What the CPU supports, as far as OpenBLAS's core types differ.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuFeatures {
    pub avx2_fma: bool,
    pub avx512f: bool,
    pub avx512bf16: bool,
    /// AVX512-FP16 or AMX: Sapphire Rapids and later.
    pub sapphire: bool,
    pub amd: bool,
}

impl CpuFeatures {
    pub fn detect() -> Self {
        use hostbench_core::isa;
        Self {
            avx2_fma: isa::avx2_fma(),
            avx512f: isa::avx512f(),
            avx512bf16: isa::avx512bf16(),
            sapphire: isa::avx512fp16() || isa::amx_bf16(),
            amd: is_amd(),
        }
    }

    /// 2 with AVX-512, 1 with AVX2 + FMA, 0 otherwise.
    fn tier(self) -> u8 {
        if self.avx512f {
            2
        } else if self.avx2_fma {
            1
        } else {
            0
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn is_amd() -> bool {
    let r = hostbench_core::isa::cpuid(0, 0);
    // "AuthenticAMD": ebx, edx, ecx
    r.ebx == u32::from_le_bytes(*b"Auth")
}
#[cfg(not(target_arch = "x86_64"))]
fn is_amd() -> bool {
    false
}

/// The vector tier of an OpenBLAS x86 core type: 2 for the AVX-512 kernels, 1 for AVX2, 0 for
/// anything older or unknown ("Prescott", "Nehalem", "Sandybridge", "generic"…).
fn core_tier(corename: &str) -> u8 {
    match corename.trim().to_ascii_lowercase().as_str() {
        "skylakex" | "cooperlake" | "sapphirerapids" => 2,
        "haswell" | "zen" | "excavator" => 1,
        _ => 0,
    }
}

/// Whether OpenBLAS ran a core type below what this CPU supports (a release older than the CPU
/// falls back to generic kernels). Off x86 nothing is judged.
pub fn fell_back(corename: &str, cpu: CpuFeatures) -> bool {
    cfg!(target_arch = "x86_64") && core_tier(corename) < cpu.tier()
}

/// The `OPENBLAS_CORETYPE` values to try for this CPU, best first (an older OpenBLAS may not
/// know the newest): SapphireRapids, Cooperlake, SkylakeX on AVX-512 (AMD's Zen 4 and 5
/// included: OpenBLAS runs them on these kernels), Zen or Haswell on AVX2.
pub fn right_cores(cpu: CpuFeatures) -> Vec<&'static str> {
    let mut v = Vec::new();
    if cpu.avx512f {
        if cpu.sapphire && !cpu.amd {
            v.push("SapphireRapids");
        }
        if cpu.avx512bf16 {
            v.push("Cooperlake");
        }
        v.push("SkylakeX");
    } else if cpu.avx2_fma {
        if cpu.amd {
            v.push("Zen");
        }
        v.push("Haswell");
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Other OpenBLAS copies on the system

/// The OpenBLAS builds Python wheels bundle, found under the usual prefixes: numpy's and
/// SciPy's `*.libs` directories and the `scipy_openblas32/64` packages, in system, local,
/// `/opt/*` and the active virtual or conda environment's site-packages. (path, origin)
pub fn wheel_libraries() -> Vec<(PathBuf, String)> {
    let mut roots: Vec<PathBuf> = ["/usr/lib", "/usr/lib64", "/usr/local/lib"]
        .iter()
        .map(PathBuf::from)
        .collect();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(p) = std::env::var_os(var) {
            roots.push(PathBuf::from(p).join("lib"));
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        roots.push(PathBuf::from(home).join(".local/lib"));
    }
    // /opt/<x>/lib, /opt/<x>/.venv/lib, /opt/<x>/venv/lib
    for opt in subdirs(Path::new("/opt")) {
        for sub in ["lib", ".venv/lib", "venv/lib"] {
            roots.push(opt.join(sub));
        }
    }
    let mut found = Vec::new();
    for root in roots {
        for py in subdirs(&root).into_iter().filter(|p| {
            p.file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with("python3"))
        }) {
            for pkgs in ["site-packages", "dist-packages"] {
                let pkgs = py.join(pkgs);
                for (dir, label) in [
                    ("numpy.libs", "numpy.libs"),
                    ("scipy.libs", "scipy.libs"),
                    ("scipy_openblas64/lib", "scipy_openblas64"),
                    ("scipy_openblas32/lib", "scipy_openblas32"),
                ] {
                    for lib in openblas_files(&pkgs.join(dir)) {
                        let name = lib
                            .file_name()
                            .map_or(String::new(), |f| f.to_string_lossy().into_owned());
                        found.push((lib.clone(), format!("{label}/{name} ({})", pkgs.display())));
                    }
                }
            }
        }
    }
    found.sort();
    found.dedup_by(|a, b| a.0 == b.0);
    found
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

fn openblas_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().is_some_and(|f| {
                        let f = f.to_string_lossy();
                        f.contains("openblas") && f.contains(".so")
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that load OpenBLAS run one at a time: one of them sets the environment, which
    /// a library loading on another thread reads.
    static LOADING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        LOADING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[test]
    fn openblas_solves_the_same_system_when_installed() {
        let _one = serial();
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
        let core = blas.corename().expect("openblas_get_corename");
        assert!(!core.is_empty() && blas.describe().contains(&core));
    }

    /// A forced core on the system library: a second, independent instance that runs the core
    /// it was given (and still solves), or `None` when this OpenBLAS does not know it.
    #[test]
    fn a_forced_core_loads_a_second_instance() {
        let _one = serial();
        let before = std::env::var_os("OPENBLAS_CORETYPE");
        let Ok(blas) = OpenBlas::load() else {
            return;
        };
        #[cfg(target_arch = "x86_64")]
        {
            let forced = blas
                .load_forced("Haswell")
                .expect("copy and load")
                .expect("every x86 OpenBLAS knows Haswell");
            assert_eq!(forced.corename().as_deref(), Some("Haswell"));
            assert_eq!(forced.forced.as_deref(), Some("Haswell"));
            assert!(forced.describe().contains("OPENBLAS_CORETYPE=Haswell"));
            let cfg = LinpackConfig {
                n: 200,
                threads: 1,
                seed: 3,
            };
            assert!(forced.solve(&cfg).expect("solve").residual < THRESHOLD);
            // the first instance keeps its own core, and the variable is gone again
            assert_ne!(blas.forced.as_deref(), Some("Haswell"));
            assert!(blas.load_forced("NoSuchCore").expect("load").is_none());
        }
        // Elsewhere the x86 core names do not apply: the instance loaded, nothing is forced.
        assert!(blas.forced.is_none());
        assert_eq!(std::env::var_os("OPENBLAS_CORETYPE"), before);
    }

    #[test]
    fn fallback_cores_are_recognised_and_the_right_one_named() {
        let spr = CpuFeatures {
            avx2_fma: true,
            avx512f: true,
            avx512bf16: true,
            sapphire: true,
            amd: false,
        };
        let zen4 = CpuFeatures {
            sapphire: false,
            amd: true,
            ..spr
        };
        let zen3 = CpuFeatures {
            avx2_fma: true,
            amd: true,
            ..CpuFeatures::default()
        };
        let skx = CpuFeatures {
            avx512bf16: false,
            sapphire: false,
            ..spr
        };
        if cfg!(target_arch = "x86_64") {
            // generic and pre-AVX-512 cores on an AVX-512 host are fallbacks ...
            for core in [
                "Prescott",
                "Haswell",
                "Zen",
                "generic",
                "Sandybridge",
                "",
                "Core2",
            ] {
                assert!(fell_back(core, spr), "{core}");
            }
            // ... the AVX-512 ones are not, whichever of them ran
            for core in ["SkylakeX", "Cooperlake", "SapphireRapids", "cooperlake\n"] {
                assert!(!fell_back(core, spr) && !fell_back(core, zen4), "{core}");
            }
            assert!(!fell_back("Zen", zen3) && !fell_back("Haswell", zen3));
            assert!(fell_back("Nehalem", zen3));
            assert!(!fell_back("Prescott", CpuFeatures::default()));
        }
        assert_eq!(
            right_cores(spr),
            ["SapphireRapids", "Cooperlake", "SkylakeX"]
        );
        assert_eq!(right_cores(zen4), ["Cooperlake", "SkylakeX"]);
        assert_eq!(right_cores(skx), ["SkylakeX"]);
        assert_eq!(right_cores(zen3), ["Zen", "Haswell"]);
        assert!(right_cores(CpuFeatures::default()).is_empty());
    }

    #[test]
    fn wheel_symbol_names_follow_the_build() {
        let plain = Symbols::ALL[0];
        let numpy = Symbols::ALL[1];
        assert_eq!(plain.name("dgesv_"), b"dgesv_\0");
        assert!(!plain.ilp64());
        assert_eq!(numpy.name("dgesv_"), b"scipy_dgesv_64_\0");
        assert_eq!(
            numpy.name("openblas_get_corename"),
            b"scipy_openblas_get_corename64_\0"
        );
        assert!(numpy.ilp64());
    }

    #[test]
    fn soname_resolves_to_a_file_when_installed() {
        let _one = serial();
        let p = resolve_soname(Path::new("libopenblas.so.0"));
        if OpenBlas::load().is_ok() {
            assert!(p.is_absolute() && p.exists(), "{}", p.display());
        }
        assert_eq!(resolve_soname(Path::new("/x/y.so")), Path::new("/x/y.so"));
    }
}
