//! The place written to (this module was `target/`, a name build tools and readers take for
//! Cargo's output): the target directory, what filesystem and device it is on, whether O_DIRECT
//! works there and with which alignment, and the safety rules for writing into it.
//!
//! Why this is its own module: a disk benchmark is only as honest as what it knows about where it
//! writes. fio errors out when O_DIRECT is refused, hard-codes nothing about alignment, never checks
//! free space and leaves its files behind; tmpfs, ZFS and overlay accept "direct" I/O that never
//! reaches storage. So, before any byte is written, hostbench
//!
//! - accepts only an existing, writable *directory* (`check_dir`): block devices are refused
//!   outright, because a benchmark that can overwrite `/dev/sda` eventually will;
//! - names the filesystem (`fs_info`) and labels those whose direct I/O measures memory (an
//!   overlay followed to its upper directory where visible: `overlay_upper`);
//! - checks free space with a margin (`check_free_space`), since filling the disk that holds `/`
//!   hurts more than a refused run (ENOSPC mid-run is still handled by the caller);
//! - finds the O_DIRECT alignment the kernel asks for (`direct_io`) rather than assuming 512;
//! - finds the device and its link (`device_info`), following loop, dm and md stacks down, so a
//!   result can be compared with the interface limit (`disk_peak`) and one of memory is labelled;
//! - writes only inside a fresh `hostbench-<pid>-<nanos>` directory (`WorkDir`) that is removed on
//!   success, failure and Ctrl-C (`install_signal_cleanup`).

mod device;
mod dir;
mod direct;
mod fs;
mod workdir;

pub use self::device::{device_info, device_info_from, disk_peak, DeviceInfo, Stack};
pub use self::dir::check_dir;
pub use self::direct::{direct_io, evict_cache, DirectIo};
pub use self::fs::{check_free_space, fs_info, overlay_upper, usable_bytes, FsInfo, OverlayUpper};
#[cfg(unix)]
pub use self::workdir::install_signal_cleanup;
pub use self::workdir::WorkDir;

/// Fixtures shared by the submodules' tests.
#[cfg(test)]
mod test_util {
    use hostbench_core::BenchError;

    pub(crate) fn msg(e: &BenchError) -> String {
        let m = e.to_string();
        assert!(!m.contains('\n'), "message is not one line: {m:?}");
        m
    }
}
