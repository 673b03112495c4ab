//! Unit tests of `cuda.rs`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

use super::*;

#[test]
fn one_wrong_element_anywhere_in_d_is_found() {
    // f32 K = 8192 in D's bytes, over a D of 64 Ki elements; the old three windows (start,
    // middle, end) would have missed an element a quarter of the way in.
    let want = 8192f32.to_le_bytes();
    let mut d: Vec<u8> = want.iter().copied().cycle().take(4 * 65536).collect();
    assert_eq!(first_wrong(&d, &want), None);
    d[4 * 16384 + 1] ^= 0x01;
    assert_eq!(first_wrong(&d, &want), Some(16384));
}

#[test]
fn without_a_driver_the_probe_says_so_and_nothing_panics() {
    let present = driver_present();
    match list() {
        Ok(devs) => assert!(present, "devices listed without a driver: {devs:?}"),
        Err(BenchError::Unsupported(why)) => {
            if !present {
                assert!(why.contains("libcuda.so"), "{why}");
            }
        }
        Err(e) => panic!("probe failed instead of reporting unsupported: {e}"),
    }
    if !present {
        let info = DeviceInfo::named(Backend::Cuda, 0, "none", "gpu");
        assert!(matches!(
            CudaSession::open(&info),
            Err(BenchError::Unsupported(_))
        ));
    }
}
