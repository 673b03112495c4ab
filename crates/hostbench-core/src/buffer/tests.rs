//! Unit tests of `buffer.rs`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

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
