//! Unit tests of `server.rs`, kept in their own file so the module itself stays short
//! (issue 53: no source file over 1,000 lines).

use super::*;

#[test]
fn one_address_takes_its_share_of_handshake_slots_and_no_more() {
    let server = Server::bind(ServerConfig::new("127.0.0.1:0".parse().unwrap())).unwrap();
    let shared = &server.shared;
    let scanner: IpAddr = "10.203.0.2".parse().unwrap();
    let other = |i: usize| -> IpAddr { format!("10.203.1.{}", i % 250).parse().unwrap() };
    for _ in 0..MAX_PENDING_PER_ADDR {
        shared.admit(Some(scanner)).unwrap();
    }
    let why = shared.admit(Some(scanner)).unwrap_err();
    assert!(
        why.contains("10.203.0.2") && why.contains("per address"),
        "{why}"
    );
    // Everyone else still gets in, up to the global cap.
    for i in 0..MAX_PENDING - MAX_PENDING_PER_ADDR {
        shared.admit(Some(other(i))).unwrap();
    }
    let why = shared.admit(None).unwrap_err();
    assert!(why.contains(&format!("at most {MAX_PENDING}")), "{why}");
    // A finished handshake gives its slot back, to its own address and to the total.
    shared.release(Some(scanner));
    shared.admit(Some(scanner)).unwrap();
    for _ in 0..MAX_PENDING_PER_ADDR {
        shared.release(Some(scanner));
    }
    for i in 0..MAX_PENDING - MAX_PENDING_PER_ADDR {
        shared.release(Some(other(i)));
    }
    assert_eq!(shared.pending.load(Ordering::Acquire), 0);
    assert!(shared.pending_by_addr.lock().unwrap().is_empty());
}
