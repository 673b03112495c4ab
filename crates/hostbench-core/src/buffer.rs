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
mod tests {
    use super::*;

    /// The pool is global, and while one test holds a guard every region any test drops or maps
    /// goes through it: the tests that map regions take turns.
    static POOL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn pool_turn() -> std::sync::MutexGuard<'static, ()> {
        POOL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Minor page faults of the calling thread so far.
    #[cfg(target_os = "linux")]
    fn minor_faults() -> i64 {
        // SAFETY: getrusage writes one rusage struct, which we provide.
        unsafe {
            let mut u: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_THREAD, &mut u);
            u.ru_minflt
        }
    }

    #[test]
    fn regions_are_aligned_zeroed_and_writable() {
        let _turn = pool_turn();
        let mut r = Region::new(3 * 4096 + 5, Pages::Small).unwrap();
        assert_eq!(r.as_ptr() as usize % ALIGN, 0);
        assert!(r.as_slice().iter().all(|&b| b == 0));
        r.touch();
        assert_eq!(r.as_slice()[0], 1);
        assert_eq!(*r.as_slice().last().unwrap(), 1);
        assert_eq!(r.as_f64().len(), (3 * 4096 + 5) / 8);
        r.as_f64_mut()[7] = 2.5;
        assert_eq!(r.as_f64()[7], 2.5);
    }

    #[test]
    fn a_guard_hands_back_kept_mappings_zeroed_and_of_the_same_kind() {
        let _turn = pool_turn();
        let _g = Reuse::start();
        let mut a = Region::new((3 << 20) + 12345, Pages::Small).unwrap();
        a.as_mut_slice().fill(7);
        let addr = a.as_ptr() as usize;
        drop(a);
        // Another page kind does not get it.
        let h = Region::new(4096, Pages::Huge).unwrap();
        assert_ne!(h.as_ptr() as usize, addr);
        // A smaller region of the same kind does, zeroed, with its own length.
        let b = Region::new(3 << 20, Pages::Small).unwrap();
        assert_eq!(b.as_ptr() as usize, addr);
        assert_eq!(b.len(), 3 << 20);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        drop(b);
        // A larger one grows the spare: zeroed, aligned, its own length, and nothing smaller is
        // left in the pool.
        let mut c = Region::new(9 << 20, Pages::Small).unwrap();
        assert_eq!(c.len(), 9 << 20);
        assert_eq!(c.as_ptr() as usize % ALIGN, 0);
        assert!(c.as_slice().iter().all(|&x| x == 0));
        assert!(spares().1.iter().all(|sp| sp.cap() >= 9 << 20));
        c.as_mut_slice().fill(3);
        drop((c, h));
    }

    /// Two regions that together fit in one kept mapping both come out of it, and once both are
    /// back, the whole mapping serves a region of its full size again: a two-thread case after
    /// a one-thread case of twice the block faults nothing new in.
    #[test]
    fn a_kept_mapping_is_shared_by_smaller_regions_and_joined_again() {
        let _turn = pool_turn();
        let _g = Reuse::start();
        let big = 16 << 20;
        let mut a = Region::new(big, Pages::Small).unwrap();
        a.as_mut_slice().fill(5);
        let (lo, hi) = (a.as_ptr() as usize, a.as_ptr() as usize + big);
        drop(a);
        let b = Region::new((6 << 20) + 100, Pages::Small).unwrap();
        let c = Region::new(6 << 20, Pages::Small).unwrap();
        for r in [&b, &c] {
            let p = r.as_ptr() as usize;
            assert!(
                p >= lo && p + r.len() <= hi,
                "{p:#x} outside {lo:#x}..{hi:#x}"
            );
            assert_eq!(p % ALIGN, 0);
            assert!(r.as_slice().iter().all(|&x| x == 0));
        }
        // The first took up to the 2 MiB boundary past its length, the second starts there.
        assert_eq!(b.as_ptr() as usize, lo);
        assert_eq!(c.as_ptr() as usize, lo + (8 << 20));
        drop((b, c));
        let d = Region::new(big, Pages::Small).unwrap();
        assert_eq!(d.as_ptr() as usize, lo);
        assert!(d.as_slice().iter().all(|&x| x == 0));
        drop(d);
        // Nothing is left in pieces: one kept mapping of this kind holds the whole range.
        let kept: Vec<usize> = spares()
            .1
            .iter()
            .filter(|sp| sp.pages == Pages::Small)
            .map(Spare::cap)
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert!(kept[0] >= big);
    }

    /// A region for overwriting skips the zeroing pass on reuse (the old bytes are still there);
    /// a plain region never does.
    #[test]
    fn only_a_plain_region_is_zeroed_on_reuse() {
        let _turn = pool_turn();
        let _g = Reuse::start();
        let mut a = Region::new(1 << 20, Pages::Small).unwrap();
        a.as_mut_slice().fill(7);
        drop(a);
        let mut b = Region::new_for_overwrite(1 << 20, Pages::Small).unwrap();
        assert!(b.as_slice().iter().all(|&x| x == 7));
        b.as_mut_slice().fill(9);
        drop(b);
        let c = Region::new(1 << 20, Pages::Small).unwrap();
        assert!(c.as_slice().iter().all(|&x| x == 0));
        // A fresh mapping reads as zeros either way.
        let d = Region::new_for_overwrite(1 << 20, Pages::Huge).unwrap();
        assert!(d.as_slice().iter().all(|&x| x == 0));
    }

    /// A primed mapping is already faulted in: the regions carved from it fault nothing new; a
    /// release gives everything back, and the next region is a fresh mapping.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_primed_mapping_serves_regions_without_faults_until_released() {
        let _turn = pool_turn();
        let g = Reuse::start();
        let len = 16 << 20;
        g.prime(len, Pages::Small).unwrap();
        // The other kind's miss leaves it alone.
        drop(Region::new(len + (4 << 20), Pages::Huge).unwrap());
        assert!(spares()
            .1
            .iter()
            .any(|sp| sp.pages == Pages::Small && sp.cap() >= len));
        let before = minor_faults();
        let mut a = Region::new(len / 2, Pages::Small).unwrap();
        let mut b = Region::new(len / 4, Pages::Small).unwrap();
        a.touch();
        b.touch();
        let faults = minor_faults() - before;
        let fresh = (len * 3 / 4 / base_page_bytes()) as i64;
        assert!(
            faults < 256,
            "{faults} faults where a fresh mapping takes {fresh}"
        );
        drop((a, b));
        g.release();
        assert!(spares().1.is_empty());
    }

    /// Growing keeps the pages already faulted in: making and touching the larger region faults
    /// in only the part the smaller one did not have (counted for this thread by getrusage).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_grown_mapping_keeps_its_pages() {
        let _turn = pool_turn();
        let _g = Reuse::start();
        // Small pages, so a fault is one base page.
        let (small, large) = ((24 << 20) + 4096 * 3, (32 << 20) + 4096 * 5);
        let mut a = Region::new(small, Pages::Small).unwrap();
        a.touch();
        drop(a);
        // Mapping it and writing every page (what a benchmark's first touch does), counted
        // without the check that it came back zeroed in between.
        let before = minor_faults();
        let mut b = Region::new(large, Pages::Small).unwrap();
        let mapped = minor_faults() - before;
        assert!(b.as_slice().iter().all(|&x| x == 0));
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        let before = minor_faults();
        b.touch();
        let faults = mapped + minor_faults() - before;
        // A fresh mapping faults in all of `large` on first touch; the grown one only the 8 MiB
        // it gained (plus a little slack for the test's own allocations).
        let page = base_page_bytes();
        let fresh = (large / page) as i64;
        let gained = ((large - small) / page) as i64;
        assert!(
            faults < gained + 256,
            "{faults} faults; fresh {fresh}, gained {gained}"
        );
    }

    /// A kept mapping that cannot be grown (advice split it into parts, which `mremap` refuses)
    /// is given back, and the request gets a fresh, zeroed mapping.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_failed_growth_falls_back_to_a_fresh_mapping() {
        let _turn = pool_turn();
        let _g = Reuse::start();
        let mut a = Region::new(4 << 20, Pages::Small).unwrap();
        a.as_mut_slice().fill(9);
        // SAFETY: the first page of our own region; other advice splits the mapping in two.
        let split = unsafe { libc::madvise(a.as_mut_ptr().cast(), 4096, libc::MADV_HUGEPAGE) };
        assert_eq!(split, 0);
        drop(a);
        let mut b = Region::new(12 << 20, Pages::Small).unwrap();
        assert_eq!(b.len(), 12 << 20);
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice().fill(1);
        assert!(spares().1.is_empty());
    }

    /// A huge-page region whose first `head` bytes the first touch put on base pages, as a
    /// fault does when no free 2 MiB page is at hand: the advice is lifted from the head for the
    /// touch and given back after, so the mapping is one huge-page mapping again.
    #[cfg(target_os = "linux")]
    fn huge_with_base_head(len: usize, head: usize) -> Region {
        let mut r = Region::new(len, Pages::Huge).unwrap();
        // SAFETY (both): the first `head` bytes of our own region, a whole number of 2 MiB pages
        // from its aligned start.
        let off = unsafe { libc::madvise(r.as_mut_ptr().cast(), head, libc::MADV_NOHUGEPAGE) };
        assert_eq!(off, 0);
        r.touch();
        let on = unsafe { libc::madvise(r.as_mut_ptr().cast(), head, libc::MADV_HUGEPAGE) };
        assert_eq!(on, 0);
        r
    }

    /// A fresh region's last huge page lies wholly inside its mapping whatever its length and
    /// wherever the kernel put the mapping: with `len + 2 MiB` mapped, a region ending part-way
    /// into a huge page lost that page to base pages when the mapping started just past a 2 MiB
    /// boundary.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_fresh_region_holds_its_last_huge_page_whole() {
        let _turn = pool_turn();
        for len in [1, 4095, ALIGN + 4096, 3 * ALIGN - 12345, 5 * ALIGN] {
            let whole = len.next_multiple_of(ALIGN);
            // Several mappings, so that some start off a 2 MiB boundary.
            let rs: Vec<Region> = (0..4)
                .map(|_| Region::new(len, Pages::Huge).unwrap())
                .collect();
            for r in &rs {
                let end = r.base.as_ptr() as usize + r.map_len;
                assert!(
                    r.as_ptr() as usize + whole <= end,
                    "len {len}: mapping ends {} bytes short of the last huge page",
                    r.as_ptr() as usize + whole - end
                );
            }
        }
    }

    /// Under a guard, the base-page head of a kept mapping is what every later region carved
    /// from it starts with: issue 31's latency curve, exactly two huge pages short at every
    /// size. Asked again (`collapse`) for the first regions, the kept mapping is repaired, and
    /// the later regions are whole without asking.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_kept_mapping_short_of_huge_pages_hands_its_base_pages_on_until_collapsed() {
        let _turn = pool_turn();
        let _g = Reuse::start();
        let kept = huge_with_base_head(16 * ALIGN, 2 * ALIGN);
        let addr = kept.as_ptr() as usize;
        let Some(first) = kept.huge_bytes() else {
            // The kernel does not say how a region is backed: nothing to check.
            return;
        };
        // The head is on base pages whatever the machine's THP setting.
        assert!(first <= 14 * ALIGN as u64, "{first}");
        drop(kept);
        let mut asked = Vec::new();
        for pages in [1, 2, 3, 4, 8] {
            let len = pages * ALIGN;
            let mut r = Region::new_for_overwrite(len, Pages::Huge).unwrap();
            assert_eq!(r.as_ptr() as usize, addr, "the kept mapping was not reused");
            r.touch();
            let huge = r.huge_bytes().unwrap_or(0);
            if huge < len as u64 {
                asked.push(pages);
                match r.collapse() {
                    Ok(()) => assert_eq!(r.huge_bytes(), Some(len as u64), "{pages} pages"),
                    // THP off or MADV_COLLAPSE missing: still short, and said why.
                    Err(why) => {
                        assert!(why.contains("MADV_COLLAPSE"), "{why}");
                        assert!(r.huge_bytes().unwrap_or(0) < len as u64);
                        return;
                    }
                }
            }
        }
        // Every region starts on the kept head: the first two found it short (one base-page
        // huge page each), then it was whole. (Where THP is off, the rest of the kept mapping
        // came back on base pages too, and each larger region asked for its own share.)
        assert_eq!(asked[..2], [1, 2], "regions that had to ask again");
        if first == 14 * ALIGN as u64 {
            assert_eq!(asked, [1, 2], "regions that had to ask again");
        }
    }

    #[test]
    fn smaps_overlap_is_summed_and_clamped() {
        let smaps = "\
00400000-00600000 r-xp 00000000 08:01 1 /bin/x
Size:               2048 kB
AnonHugePages:         0 kB
7f0000000000-7f0000400000 rw-p 00000000 00:00 0
Size:               4096 kB
AnonHugePages:      4096 kB
7f0000400000-7f0000600000 rw-p 00000000 00:00 0
AnonHugePages:      2048 kB
7f0000800000-7f0000a00000 rw-p 00000000 00:00 0
AnonHugePages:      2048 kB
";
        // The range covers the first anonymous mapping and half of the second.
        let got = anon_huge_bytes_in(smaps.lines(), 0x7f00_0000_0000, 0x7f00_0050_0000);
        assert_eq!(got, 4096 * 1024 + 1024 * 1024);
        assert_eq!(anon_huge_bytes_in(smaps.lines(), 0x1000, 0x2000), 0);
        // Read as a stream, smaps is left once a mapping starts past the range.
        let never = std::iter::once_with(|| -> &str { panic!("read past the region") });
        let got = anon_huge_bytes_in(
            smaps.lines().chain(never),
            0x7f00_0000_0000,
            0x7f00_0050_0000,
        );
        assert_eq!(got, 4096 * 1024 + 1024 * 1024);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn pagemap_scan_counts_the_huge_pages_smaps_counts() {
        let _turn = pool_turn();
        let mut huge = Region::new(32 << 20, Pages::Huge).unwrap();
        huge.touch();
        let mut small = Region::new(8 << 20, Pages::Small).unwrap();
        small.touch();
        for r in [&huge, &small] {
            let start = r.as_ptr() as u64;
            let end = start + r.len() as u64;
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            let want = anon_huge_bytes_in(smaps.lines(), start, end);
            // Kernels before 6.7 have no PAGEMAP_SCAN; `huge_bytes` then reads smaps.
            if let Some(got) = pagemap_huge_bytes(start, end) {
                assert_eq!(got, want);
            }
            assert_eq!(r.huge_bytes(), Some(want));
        }
        assert_eq!(small.huge_bytes(), Some(0));
    }

    #[test]
    fn binding_to_node_0_keeps_pages_there_and_a_missing_node_fails() {
        let _turn = pool_turn();
        let mut r = Region::new(8 << 20, Pages::Small).unwrap();
        match r.bind_node(0) {
            Ok(()) => {
                r.touch();
                if let Some(share) = r.share_on_node(0, 64) {
                    assert_eq!(share, 1.0);
                }
            }
            // A kernel without NUMA support: reported as unsupported, never as a failure.
            Err(e) => assert!(matches!(e, BenchError::Unsupported(_)), "{e}"),
        }
        let r = Region::new(1 << 20, Pages::Small).unwrap();
        let e = r.bind_node(4000).unwrap_err().to_string();
        assert!(e.contains("NUMA node 4000"), "{e}");
    }

    /// A huge-page region that the first touch left on base pages is short; `collapse` backs it
    /// with huge pages and keeps its contents, or says why the kernel would not.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_short_huge_page_region_is_collapsed_with_its_contents() {
        let _turn = pool_turn();
        let mut r = Region::new(8 << 20, Pages::Huge).unwrap();
        r.touch_on_base_pages();
        for (i, b) in r.as_mut_slice().iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let Some(before) = r.huge_bytes() else { return };
        assert_eq!(before, 0, "touched on base pages");
        match r.collapse() {
            Ok(()) => assert_eq!(r.huge_bytes(), Some(8 << 20)),
            Err(why) => {
                // Only a kernel without it, THP turned off, or memory it cannot find or lock
                // now may refuse.
                assert!(
                    ["not available", "disabled", "fragmented", "busy"]
                        .iter()
                        .any(|w| why.contains(w)),
                    "{why}"
                );
                assert_eq!(r.huge_bytes(), Some(0));
            }
        }
        assert!(r
            .as_slice()
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i % 251) as u8));
        let tiny = Region::new(4096, Pages::Small).unwrap();
        assert!(tiny.collapse().is_err());
    }

    #[test]
    fn huge_page_request_is_reported_not_assumed() {
        let _turn = pool_turn();
        let mut r = Region::new(8 << 20, Pages::Huge).unwrap();
        r.touch();
        // Whether THP was granted depends on the machine; the answer must stay within the region.
        if let Some(h) = r.huge_bytes() {
            assert!(h <= 8 << 20);
        }
        let mut s = Region::new(8 << 20, Pages::Small).unwrap();
        s.touch();
        if let Some(h) = s.huge_bytes() {
            assert_eq!(h, 0, "MADV_NOHUGEPAGE region got huge pages");
        }
    }
}
