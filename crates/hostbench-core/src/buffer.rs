//! Memory regions for the benchmarks: anonymous mappings with a chosen page policy, first-touched
//! by the thread that will use them, and a check of which page size the kernel actually granted.
//!
//! Why not `Vec`: the allocator neither aligns large blocks to a huge page nor lets us ask for
//! (or refuse) transparent huge pages, and a zeroed `Vec` may be touched by the allocating thread,
//! which on a NUMA machine puts every page on that thread's node. Here the mapping is created
//! untouched; [`Region::touch`], called on the owning pinned thread, faults every page in there
//! (DESIGN §5: first touch by the thread that streams it).
//!
//! The disk engines use the same regions for their I/O buffers, where huge pages matter for a
//! different reason: a buffer that is physically contiguous goes to the device as a few large DMA
//! segments instead of one per 4 KiB page (see hostbench-disk's engine).
//!
//! Huge pages are a request, not a promise: `madvise(MADV_HUGEPAGE)` is honoured only when THP is
//! enabled and memory is not fragmented, so [`Region::huge_bytes`] asks the kernel (`PAGEMAP_SCAN`,
//! or `/proc/self/smaps` before Linux 6.7) how much of the region really is backed by huge pages,
//! and the caller reports that.

use std::ptr::NonNull;

use crate::BenchError;

crate::named_enum! {
    /// Which page size a region asks for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Pages("page size") {
        /// Base pages (4 KiB on x86-64); transparent huge pages explicitly refused.
        Small = "4k" | "small" | "base",
        /// Transparent huge pages requested (2 MiB on x86-64); verify with `huge_bytes`.
        Huge = "huge" | "thp" | "2m",
    }
}

/// Alignment of every region: a 2 MiB boundary, so a huge-page request can be granted from the
/// first byte and SIMD kernels see cache-line- and vector-aligned arrays.
pub const ALIGN: usize = 2 << 20;

/// An anonymous private mapping of `len` bytes aligned to [`ALIGN`], unmapped on drop.
#[derive(Debug)]
pub struct Region {
    base: NonNull<u8>,
    map_len: usize,
    ptr: NonNull<u8>,
    len: usize,
    pages: Pages,
}

// SAFETY: a Region owns its mapping exclusively (like a Box<[u8]>); moving it between threads or
// sharing `&Region` for reads is as safe as for a boxed slice.
unsafe impl Send for Region {}
// SAFETY: see above; shared access only hands out `&[u8]`.
unsafe impl Sync for Region {}

/// A mapping kept after its region was dropped, while a [`Reuse`] guard is alive.
struct Spare {
    base: NonNull<u8>,
    map_len: usize,
    ptr: NonNull<u8>,
    pages: Pages,
}

impl Spare {
    /// Usable bytes from `ptr` to the end of the mapping.
    fn cap(&self) -> usize {
        self.map_len - (self.ptr.as_ptr() as usize - self.base.as_ptr() as usize)
    }

    fn end(&self) -> usize {
        self.base.as_ptr() as usize + self.map_len
    }

    /// Cut the mapping after the first 2 MiB boundary at or past `len` usable bytes and return
    /// the part beyond it as a spare of its own, where that part holds at least [`ALIGN`]. Both
    /// parts stay page-aligned address ranges of the same mapping, each unmapped or grown on
    /// its own (the kernel splits the VMA where needed) or joined again by [`keep`].
    fn split_off(&mut self, len: usize) -> Option<Spare> {
        let cut = (self.ptr.as_ptr() as usize)
            .checked_add(len)?
            .next_multiple_of(ALIGN);
        if self.end().checked_sub(cut)? < ALIGN {
            return None;
        }
        let rest = NonNull::new(cut as *mut u8)?;
        let tail = Spare {
            base: rest,
            map_len: self.end() - cut,
            ptr: rest,
            pages: self.pages,
        };
        self.map_len = cut - self.base.as_ptr() as usize;
        Some(tail)
    }
}

/// Put a mapping back in the pool, joined with the kept mappings of its kind that adjoin it
/// (parts [`Spare::split_off`] cut from one mapping, returning one by one), so that the next
/// large region finds them whole again; unmapped instead when no guard is alive any more.
fn keep(mut sp: Spare) {
    let mut s = spares();
    if s.0 == 0 {
        drop(s);
        unmap(sp.base, sp.map_len);
        return;
    }
    while let Some(i) = s.1.iter().position(|o| {
        o.pages == sp.pages
            && (o.end() == sp.base.as_ptr() as usize || sp.end() == o.base.as_ptr() as usize)
    }) {
        let o = s.1.swap_remove(i);
        if o.end() == sp.base.as_ptr() as usize {
            // The neighbour below: its base and usable start (still 2 MiB-aligned) lead.
            sp = Spare {
                base: o.base,
                map_len: o.map_len + sp.map_len,
                ptr: o.ptr,
                pages: sp.pages,
            };
        } else {
            sp.map_len += o.map_len;
        }
    }
    s.1.push(sp);
}

// SAFETY: a spare is an unused mapping owned by the pool alone.
unsafe impl Send for Spare {}

/// Live [`Reuse`] guards, and the spare mappings they keep.
static SPARES: std::sync::Mutex<(usize, Vec<Spare>)> = std::sync::Mutex::new((0, Vec::new()));

fn spares() -> std::sync::MutexGuard<'static, (usize, Vec<Spare>)> {
    SPARES.lock().unwrap_or_else(|e| e.into_inner())
}

fn unmap(base: NonNull<u8>, map_len: usize) {
    #[cfg(unix)]
    // SAFETY: base/map_len are exactly what mmap returned, and nothing uses the mapping any more.
    unsafe {
        libc::munmap(base.as_ptr().cast(), map_len);
    }
    #[cfg(not(unix))]
    let _ = (base, map_len);
}

/// While a guard is alive, a dropped region's mapping is kept, and the next region of the same
/// page kind that fits in it gets it back (zeroed, unless asked for with
/// [`Region::new_for_overwrite`]) instead of a fresh mapping; where none fits,
/// the largest is grown in place (`mremap`), so a sweep whose sizes grow faults in only what
/// each new size adds. A region given a kept mapping much larger than itself takes only what it
/// needs (up to a 2 MiB boundary); the rest stays kept for the next region, and neighbours that
/// come back join again: a case of two threads then finds its two blocks in the one mapping a
/// one-thread case of twice the block left, where it used to fault a second one in.
///
/// Why: a fresh mapping is faulted in and zeroed by the kernel page by page, and under a
/// hypervisor each first touch can also cost the host a fault. A memory phase that sizes its
/// sets from a large last-level cache maps tens of GiB one case after another (a 480 MiB LLC
/// gives 2–6 GiB a case), and most of that phase was then system time. Zeroing a mapping that is
/// already in place is one streaming pass.
///
/// Only for one-NUMA-node hosts: a reused page stays on the node where it was first touched, so
/// where first touch decides placement the caller must not take a guard.
pub struct Reuse(());

impl Reuse {
    pub fn start() -> Self {
        spares().0 += 1;
        Reuse(())
    }

    /// Give back every kept mapping now; the guard stays alive and keeps what is dropped next.
    /// Freed memory stays backed for a moment on a VM that reports free pages to its host, so
    /// a process started at once (likwid-bench beside a case) gets pages that cost no host
    /// fault, where a cold start paid about 1.5 s per GiB.
    pub fn release(&self) {
        let freed = std::mem::take(&mut spares().1);
        for sp in freed {
            unmap(sp.base, sp.map_len);
        }
    }

    /// Map `len` bytes of `pages`, fault every page in, and keep the mapping for the regions
    /// that follow: right after a release, the memory just freed comes back warm in one pass,
    /// instead of being reported to the host and faulted back region by region.
    pub fn prime(&self, len: usize, pages: Pages) -> Result<(), BenchError> {
        // The touch writes every page, so a kept mapping it is given needs no zeroing pass.
        let mut r = Region::new_for_overwrite(len, pages)?;
        r.touch();
        Ok(())
    }
}

impl Drop for Reuse {
    fn drop(&mut self) {
        let freed = {
            let mut s = spares();
            s.0 -= 1;
            if s.0 == 0 {
                std::mem::take(&mut s.1)
            } else {
                Vec::new()
            }
        };
        for sp in freed {
            unmap(sp.base, sp.map_len);
        }
    }
}

/// The smallest kept mapping of `pages` that holds `len` bytes, as a region (zeroed if `zero`). On a miss the
/// largest kept mapping of that kind is grown to `len` instead (a sweep's sizes grow point by
/// point, and the pages already faulted in come along), and the other kept mappings of that kind
/// too small for `len` are given back, so the pool never holds memory that a larger request then
/// has to find beside it. Mappings of the other kind stay: the latency curve takes turns.
fn reuse(len: usize, pages: Pages, zero: bool) -> Option<Region> {
    let (picked, freed) = {
        let mut s = spares();
        if s.0 == 0 {
            return None;
        }
        let of_kind = s.1.iter().enumerate().filter(|(_, sp)| sp.pages == pages);
        let fits = of_kind
            .clone()
            .filter(|(_, sp)| sp.cap() >= len)
            .min_by_key(|(_, sp)| sp.cap())
            .map(|(i, _)| i);
        match fits {
            Some(i) => (Some(s.1.swap_remove(i)), Vec::new()),
            None => {
                // A miss: the largest of this kind is grown, the others too small are given back.
                let largest = of_kind.max_by_key(|(_, sp)| sp.cap()).map(|(i, _)| i);
                let picked = largest.map(|i| s.1.swap_remove(i));
                let (small, keep) = std::mem::take(&mut s.1)
                    .into_iter()
                    .partition(|sp| sp.pages == pages && sp.cap() < len);
                s.1 = keep;
                (picked, small)
            }
        }
    };
    for sp in freed {
        unmap(sp.base, sp.map_len);
    }
    let mut sp = picked?;
    if sp.cap() < len {
        sp = grow(sp, len)?;
    } else if let Some(rest) = sp.split_off(len) {
        keep(rest);
    }
    if zero {
        // SAFETY: ptr..ptr+len lies inside the spare's mapping (cap() >= len), which only we own.
        unsafe { std::ptr::write_bytes(sp.ptr.as_ptr(), 0, len) };
    }
    let region = Region {
        base: sp.base,
        map_len: sp.map_len,
        ptr: sp.ptr,
        len,
        pages,
    };
    region.advise();
    Some(region)
}

/// Grow a kept mapping to hold `len` bytes from a 2 MiB boundary, keeping the pages it has
/// (`mremap`); `None`, with the mapping given back, where that fails.
///
/// Why a reservation: `mremap` may move the mapping, and at an arbitrary new address the usable
/// part would no longer start on a 2 MiB boundary, which splits every huge page in it. So an
/// address range is reserved first, the mapping is moved to the place in it where its usable
/// part is aligned again (huge pages then move whole), and the rest of the reservation is
/// unmapped.
#[cfg(target_os = "linux")]
fn grow(sp: Spare, len: usize) -> Option<Spare> {
    let offset = sp.ptr.as_ptr() as usize - sp.base.as_ptr() as usize;
    // Whole 2 MiB units, so every address computed below is page-aligned on any page size.
    let lens = len
        .checked_add(2 * ALIGN - 1)
        .map(|l| l / ALIGN * ALIGN)
        .and_then(|m| Some((m, m.checked_add(ALIGN)?)));
    let Some((new_map_len, resv_len)) = lens else {
        unmap(sp.base, sp.map_len);
        return None;
    };
    // SAFETY: an inaccessible anonymous reservation with no address hint; checked below.
    let resv = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            resv_len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if resv == libc::MAP_FAILED {
        unmap(sp.base, sp.map_len);
        return None;
    }
    let resv = resv as usize;
    // The first 2 MiB boundary at or after resv + offset; the mapping starts `offset` before it,
    // so it lies inside the reservation: resv <= dest_base < resv + ALIGN, and the reservation
    // is new_map_len + ALIGN long (mmap placed all of it, so no sum below can overflow).
    let dest_ptr = (resv + offset).next_multiple_of(ALIGN);
    let dest_base = dest_ptr - offset;
    let end = dest_base + new_map_len;
    // SAFETY: the source is our own mapping, unused by anyone; the destination lies inside the
    // reservation just made, which MREMAP_FIXED replaces.
    let moved = unsafe {
        libc::mremap(
            sp.base.as_ptr().cast(),
            sp.map_len,
            new_map_len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            dest_base as *mut libc::c_void,
        )
    };
    let (head, tail) = (dest_base - resv, resv + resv_len - end);
    // SAFETY (both): the parts of our reservation before and after the destination, whole pages,
    // which mremap never touches, whether it succeeded or not.
    unsafe {
        if head > 0 {
            libc::munmap(resv as *mut libc::c_void, head);
        }
        if tail > 0 {
            libc::munmap(end as *mut libc::c_void, tail);
        }
    }
    if moved == libc::MAP_FAILED {
        // The source is untouched. The destination is left alone: still our inaccessible
        // reservation on recent kernels, but older ones unmap it before failing, and another
        // thread may have mapped something there since.
        unmap(sp.base, sp.map_len);
        return None;
    }
    match (
        NonNull::new(dest_base as *mut u8),
        NonNull::new(dest_ptr as *mut u8),
    ) {
        (Some(base), Some(ptr)) => Some(Spare {
            base,
            map_len: new_map_len,
            ptr,
            pages: sp.pages,
        }),
        _ => {
            // SAFETY: the mapping mremap just made, ours alone (unreachable: mmap never places
            // a reservation at address 0).
            unsafe { libc::munmap(dest_base as *mut libc::c_void, new_map_len) };
            None
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn grow(sp: Spare, _len: usize) -> Option<Spare> {
    unmap(sp.base, sp.map_len);
    None
}

impl Region {
    /// Map `len` bytes (at least one) without touching them; under a [`Reuse`] guard, a kept
    /// mapping that fits, zeroed.
    pub fn new(len: usize, pages: Pages) -> Result<Self, BenchError> {
        Self::map(len, pages, true)
    }

    /// As [`Region::new`], for a caller that writes every byte before it reads any (a
    /// benchmark's arrays, filled with their initial contents): a kept mapping comes back as the
    /// region that last used it left it, not zeroed first. At a 480 MiB LLC the bandwidth cases
    /// alone zeroed some 50 GiB that their own fill then wrote again, on one thread.
    pub fn new_for_overwrite(len: usize, pages: Pages) -> Result<Self, BenchError> {
        Self::map(len, pages, false)
    }

    fn map(len: usize, pages: Pages, zero: bool) -> Result<Self, BenchError> {
        let len = len.max(1);
        if let Some(r) = reuse(len, pages, zero) {
            return Ok(r);
        }
        // Whole 2 MiB pages past the aligned start, so the region's last huge page lies inside
        // the mapping even when `len` ends part-way through it: with only `len + ALIGN`, a
        // mapping that starts just past a 2 MiB boundary ends before that page does, and the
        // kernel can back its part of the region with base pages only (nor collapse it).
        let map_len = len
            .checked_next_multiple_of(ALIGN)
            .and_then(|l| l.checked_add(ALIGN))
            .ok_or_else(|| BenchError::invalid(format!("region of {len} bytes is too large")))?;
        #[cfg(unix)]
        {
            // SAFETY: an anonymous private mapping with no address hint has no preconditions; the
            // result is checked against MAP_FAILED before use.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return Err(BenchError::Failed(format!(
                    "cannot map {len} bytes: {}",
                    std::io::Error::last_os_error()
                )));
            }
            let base = NonNull::new(base.cast::<u8>())
                .ok_or_else(|| BenchError::Failed("mmap returned null".into()))?;
            let offset = (ALIGN - (base.as_ptr() as usize % ALIGN)) % ALIGN;
            // SAFETY: offset < ALIGN and the mapping is at least len + ALIGN bytes long.
            let ptr = unsafe { NonNull::new_unchecked(base.as_ptr().add(offset)) };
            let region = Self {
                base,
                map_len,
                ptr,
                len,
                pages,
            };
            region.advise();
            Ok(region)
        }
        #[cfg(not(unix))]
        {
            let _ = (map_len, pages);
            Err(BenchError::unsupported(
                "memory regions need mmap (Unix only)",
            ))
        }
    }

    #[cfg(target_os = "linux")]
    fn advise(&self) {
        let advice = match self.pages {
            Pages::Small => libc::MADV_NOHUGEPAGE,
            Pages::Huge => libc::MADV_HUGEPAGE,
        };
        // The whole mapping, alignment slack included, so that it stays one VMA: `mremap` (see
        // `grow`) cannot move a mapping that advice has split into parts.
        // SAFETY: exactly our own mapping. A refusal (THP compiled out) only means the request is
        // not honoured, which `huge_bytes` reports.
        unsafe {
            libc::madvise(self.base.as_ptr().cast(), self.map_len, advice);
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn advise(&self) {}

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn pages(&self) -> Pages {
        self.pages
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr..ptr+len is mapped readable for the life of self; anonymous pages read as
        // zero before they are written.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The region as `f64`s (the tail that does not fill a whole element is left out).
    pub fn as_f64(&self) -> &[f64] {
        // SAFETY: ptr is ALIGN-aligned (≥ 8), every bit pattern is a valid f64.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast(), self.len / 8) }
    }

    pub fn as_f64_mut(&mut self) -> &mut [f64] {
        // SAFETY: as above, with exclusive access through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast(), self.len / 8) }
    }

    /// Fault every page in from the calling thread (first touch places it on this thread's NUMA
    /// node), writing a non-zero byte so no page stays the shared zero page.
    pub fn touch(&mut self) {
        let step = 4096;
        let s = self.as_mut_slice();
        let mut i = 0;
        while i < s.len() {
            s[i] = 1;
            i += step;
        }
        if let Some(last) = s.last_mut() {
            *last = 1;
        }
    }

    /// Fault the region in on base pages whatever it asked for, then restore its own advice:
    /// the state a fragmented machine leaves a huge-page request in at first touch, so that the
    /// path that repairs it ([`Region::collapse`]) can be exercised on any machine.
    pub fn touch_on_base_pages(&mut self) {
        #[cfg(target_os = "linux")]
        // SAFETY: exactly our own mapping. Its pages are dropped first (a kept mapping may bring
        // huge pages along; the touch below writes every page anyway), then advice changes only
        // how it is backed.
        unsafe {
            libc::madvise(self.ptr.as_ptr().cast(), self.len, libc::MADV_DONTNEED);
            libc::madvise(
                self.base.as_ptr().cast(),
                self.map_len,
                libc::MADV_NOHUGEPAGE,
            );
        }
        self.touch();
        self.advise();
    }

    /// Bind the region's pages to NUMA node `node` (`mbind(MPOL_BIND)`), before the first touch,
    /// so a page faulted in by any thread comes from that node's memory, or fails: a strict
    /// binding never falls back to another node behind the measurement's back.
    #[cfg(target_os = "linux")]
    pub fn bind_node(&self, node: usize) -> Result<(), BenchError> {
        const MPOL_BIND: libc::c_long = 2;
        const MPOL_MF_STRICT: libc::c_ulong = 1;
        let bits = 8 * std::mem::size_of::<libc::c_ulong>();
        let mut mask: Vec<libc::c_ulong> = vec![0; node / bits + 1];
        mask[node / bits] |= 1 << (node % bits);
        // SAFETY: the range is our own mapping; the mask outlives the call and holds `maxnode`
        // bits (the kernel reads maxnode - 1 bits, hence the + 1).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                self.ptr.as_ptr(),
                self.len,
                MPOL_BIND,
                mask.as_ptr(),
                (mask.len() * bits + 1) as libc::c_ulong,
                MPOL_MF_STRICT,
            )
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ENOSYS) | Some(libc::EPERM) => BenchError::unsupported(format!(
                    "cannot bind memory to NUMA node {node}: {e} (kernel without NUMA support or \
                     mbind forbidden here)"
                )),
                _ => BenchError::Failed(format!("cannot bind memory to NUMA node {node}: {e}")),
            });
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    pub fn bind_node(&self, node: usize) -> Result<(), BenchError> {
        Err(BenchError::unsupported(format!(
            "binding memory to NUMA node {node} needs Linux"
        )))
    }

    /// Share of up to `samples` pages, spread evenly over the (touched) region, that the kernel
    /// reports on NUMA node `node` (`move_pages` in query mode); `None` when it cannot tell.
    #[cfg(target_os = "linux")]
    pub fn share_on_node(&self, node: usize, samples: usize) -> Option<f64> {
        let page = 4096usize;
        let pages = self.len.div_ceil(page).max(1);
        let n = samples.clamp(1, pages);
        let addrs: Vec<*mut libc::c_void> = (0..n)
            .map(|i| {
                // SAFETY: i * pages / n < pages, so the offset lies inside the region.
                unsafe { self.ptr.as_ptr().add(i * pages / n * page).cast() }
            })
            .collect();
        let mut status: Vec<libc::c_int> = vec![-1; n];
        // SAFETY: with a null `nodes` argument move_pages only reports where each page is,
        // writing one status per address into `status`, which holds `n` entries.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_move_pages,
                0 as libc::c_int,
                n as libc::c_ulong,
                addrs.as_ptr(),
                std::ptr::null::<libc::c_int>(),
                status.as_mut_ptr(),
                0 as libc::c_int,
            )
        };
        if rc != 0 {
            return None;
        }
        let known: Vec<i32> = status.into_iter().filter(|&s| s >= 0).collect();
        if known.is_empty() {
            return None;
        }
        let on = known.iter().filter(|&&s| s as usize == node).count();
        Some(on as f64 / known.len() as f64)
    }

    #[cfg(not(target_os = "linux"))]
    pub fn share_on_node(&self, _node: usize, _samples: usize) -> Option<f64> {
        None
    }

    /// Ask the kernel to back the region's whole huge-page ranges with huge pages now
    /// (`MADV_COLLAPSE`, Linux 6.1+), keeping its contents: the second request, for a region
    /// that came back partly on base pages at first touch (memory fragmented at that moment, a
    /// fault that fell back, or pages faulted in before the advice). Synchronous, unlike
    /// khugepaged, which may take minutes. `Err` says why not, in words for a record.
    #[cfg(target_os = "linux")]
    pub fn collapse(&self) -> Result<(), String> {
        // Not yet in every libc crate release: include/uapi/asm-generic/mman-common.h.
        const MADV_COLLAPSE: libc::c_int = 25;
        // EAGAIN: pages the kernel could not lock just then; worth another try or two.
        const TRIES: usize = 3;
        let thp = thp_setting();
        if thp.contains("[never]") {
            // The administrator turned huge pages off; forcing them in would defy that.
            return Err(format!(
                "transparent huge pages are disabled (transparent_hugepage/enabled: {thp})"
            ));
        }
        // The huge pages that hold the region, from its 2 MiB-aligned start through the one its
        // last byte lies in, as far as the mapping reaches (a fresh mapping always reaches that
        // far; a kept one is cut at a 2 MiB boundary).
        let ptr = self.ptr.as_ptr() as usize;
        let map_end = self.base.as_ptr() as usize + self.map_len;
        let len = self
            .len
            .next_multiple_of(ALIGN)
            .min((map_end - ptr) / ALIGN * ALIGN);
        if len == 0 {
            return Err("the region holds no whole huge page".into());
        }
        let mut last = None;
        for _ in 0..TRIES {
            // SAFETY: a range of our own mapping (computed above to stay inside it);
            // MADV_COLLAPSE only changes how it is backed, never its contents, and fails cleanly
            // where it is unknown.
            if unsafe { libc::madvise(self.ptr.as_ptr().cast(), len, MADV_COLLAPSE) } == 0 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            let again = e.raw_os_error() == Some(libc::EAGAIN);
            last = Some(e);
            if !again {
                break;
            }
        }
        let e = last.unwrap_or_else(|| std::io::Error::from_raw_os_error(libc::EAGAIN));
        Err(match e.raw_os_error() {
            Some(libc::EINVAL) => {
                "MADV_COLLAPSE is not available (Linux 6.1+ with transparent huge pages)".into()
            }
            Some(libc::ENOMEM) => format!(
                "MADV_COLLAPSE could not get huge pages ({e}): memory is fragmented or short"
            ),
            Some(libc::EAGAIN) => format!(
                "MADV_COLLAPSE could not lock the pages ({e}), {TRIES} tries: memory is busy"
            ),
            _ => format!("MADV_COLLAPSE refused: {e}"),
        })
    }

    #[cfg(not(target_os = "linux"))]
    pub fn collapse(&self) -> Result<(), String> {
        Err("MADV_COLLAPSE is Linux-only".into())
    }

    /// Bytes of this region backed by (PMD-mapped) transparent huge pages; `None` where the
    /// kernel does not say (not Linux, restricted procfs).
    ///
    /// Asked of `PAGEMAP_SCAN` (Linux 6.7+), which walks this range alone, else read from
    /// `/proc/self/smaps`. Reading smaps walks the page tables of every mapping it lists, and a
    /// multi-GiB mapping of 4 KiB pages (a latency curve's set, kept for reuse) costs some 40 ms
    /// per read: a memory phase that checks every case's arrays spent seconds there. So smaps
    /// is read as a stream and closed once it lists mappings past this region.
    pub fn huge_bytes(&self) -> Option<u64> {
        let start = self.ptr.as_ptr() as u64;
        let end = start + self.len as u64;
        pagemap_huge_bytes(start, end).or_else(|| {
            use std::io::BufRead;
            let f = std::fs::File::open("/proc/self/smaps").ok()?;
            let lines = std::io::BufReader::new(f).lines().map_while(Result::ok);
            Some(anon_huge_bytes_in(lines, start, end))
        })
    }
}

/// The THP policy line (`always [madvise] never`), to explain a refused huge-page request.
pub fn thp_setting() -> String {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unreadable".into())
}

/// `PAGEMAP_SCAN`'s argument and result types (linux/fs.h).
#[cfg(target_os = "linux")]
mod pm_scan {
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    pub struct PageRegion {
        pub start: u64,
        pub end: u64,
        pub categories: u64,
    }

    #[repr(C)]
    #[derive(Default)]
    pub struct Arg {
        pub size: u64,
        pub flags: u64,
        pub start: u64,
        pub end: u64,
        pub walk_end: u64,
        pub vec: u64,
        pub vec_len: u64,
        pub max_pages: u64,
        pub category_inverted: u64,
        pub category_mask: u64,
        pub category_anyof_mask: u64,
        pub return_mask: u64,
    }

    /// `_IOWR('f', 16, struct pm_scan_arg)`.
    pub const PAGEMAP_SCAN: u64 =
        (3 << 30) | ((std::mem::size_of::<Arg>() as u64) << 16) | (0x66 << 8) | 16;
    pub const PAGE_IS_PFNZERO: u64 = 1 << 5;
    /// A PMD-mapped THP (or hugetlb) page.
    pub const PAGE_IS_HUGE: u64 = 1 << 6;
}

/// Bytes of `[start, end)` mapped by huge pages, from `PAGEMAP_SCAN`; `None` where the kernel
/// lacks it (before 6.7) or refuses. The huge zero page (a THP region only ever read) is not
/// counted, as smaps' `AnonHugePages` does not count it.
#[cfg(target_os = "linux")]
fn pagemap_huge_bytes(start: u64, end: u64) -> Option<u64> {
    use std::os::fd::AsRawFd;
    // PAGEMAP_SCAN's number below is in the generic ioctl encoding; these architectures encode
    // differently, and smaps answers there.
    if cfg!(any(
        target_arch = "powerpc",
        target_arch = "powerpc64",
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "sparc64"
    )) {
        return None;
    }
    // The scan takes whole pages; a region starts on one (it is 2 MiB-aligned).
    let page = base_page_bytes() as u64;
    let end = end.div_ceil(page) * page;
    let f = std::fs::File::open("/proc/self/pagemap").ok()?;
    let mut vec = [pm_scan::PageRegion::default(); 64];
    let mut total = 0u64;
    let mut from = start;
    while from < end {
        let mut arg = pm_scan::Arg {
            size: std::mem::size_of::<pm_scan::Arg>() as u64,
            start: from,
            end,
            vec: vec.as_mut_ptr() as u64,
            vec_len: vec.len() as u64,
            category_inverted: pm_scan::PAGE_IS_PFNZERO,
            category_mask: pm_scan::PAGE_IS_HUGE | pm_scan::PAGE_IS_PFNZERO,
            return_mask: pm_scan::PAGE_IS_HUGE,
            ..Default::default()
        };
        // SAFETY: `arg` is a valid pm_scan_arg whose `vec` points at `vec.len()` writable
        // page_region entries that outlive the call; the kernel writes only those and `arg`.
        let n = unsafe {
            libc::ioctl(
                f.as_raw_fd(),
                pm_scan::PAGEMAP_SCAN as _,
                &mut arg as *mut pm_scan::Arg,
            )
        };
        if n < 0 {
            return None;
        }
        total += vec[..n as usize]
            .iter()
            .map(|r| r.end.min(end) - r.start.max(from))
            .sum::<u64>();
        if arg.walk_end <= from {
            return None;
        }
        from = arg.walk_end;
    }
    Some(total)
}

#[cfg(not(target_os = "linux"))]
fn pagemap_huge_bytes(_start: u64, _end: u64) -> Option<u64> {
    None
}

/// The base page size (4 KiB on x86-64; 4, 16 or 64 KiB on Arm64).
#[cfg(target_os = "linux")]
fn base_page_bytes() -> usize {
    // SAFETY: sysconf only reads a constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096)
}

impl Drop for Region {
    fn drop(&mut self) {
        keep(Spare {
            base: self.base,
            map_len: self.map_len,
            ptr: self.ptr,
            pages: self.pages,
        });
    }
}

/// Sum `AnonHugePages` over the smaps mappings that overlap `[start, end)`, counting only the
/// overlapping share of a mapping that extends beyond the range (the alignment slack), from
/// smaps' lines as they come. smaps lists mappings in address order, so the first mapping that
/// starts at or past `end` ends the read: the kernel then never walks the page tables of the
/// mappings after it.
fn anon_huge_bytes_in<L: AsRef<str>>(lines: impl Iterator<Item = L>, start: u64, end: u64) -> u64 {
    let mut total = 0u64;
    let mut current: Option<(u64, u64)> = None;
    for line in lines {
        let line = line.as_ref();
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
                if a >= end {
                    break;
                }
                current = (b > start).then_some((a, b));
                continue;
            }
        }
        if let (Some((a, b)), Some(rest)) = (current, line.strip_prefix("AnonHugePages:")) {
            let kb: u64 = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let overlap = b.min(end) - a.max(start);
            total += (kb * 1024).min(overlap);
        }
    }
    total
}

#[cfg(test)]
mod tests;
