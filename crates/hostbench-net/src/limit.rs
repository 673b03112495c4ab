//! The theoretical limit of a path: which interface reaches the peer, its link speed and MTU,
//! and the goodput left after Ethernet, IP and TCP/UDP overhead.
//!
//! An unknown link speed is a normal state (virtual NICs, Wi-Fi, some drivers), not an error:
//! the record then carries no peak and says why. Loopback and virtual interfaces (veth, bridges,
//! tun) have no wire at all, and the "speed" a veth reports (10 Gbit/s) is a constant of the
//! driver, not a limit — traffic through it runs at memory speed — so it is not used as one.

use std::ffi::CStr;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;

use hostbench_core::model::Peak;
use hostbench_core::spec::Spec;

use crate::wire::Proto;

/// Per-frame bytes on an Ethernet wire beyond the IP packet: preamble + SFD 8, MAC header 14,
/// FCS 4, inter-frame gap 12.
pub const ETHERNET_OVERHEAD: u64 = 38;

/// The interface a peer is reached through.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Iface {
    pub name: String,
    pub mtu: Option<u64>,
    /// Link speed from sysfs, bit/s (`None`: unreadable or not reported).
    pub speed_bps: Option<f64>,
    pub loopback: bool,
    /// Under /sys/devices/virtual: veth, bridge, tun, dummy, lo.
    pub virtual_if: bool,
}

/// Find the interface whose address the kernel would use to reach `peer`.
pub fn route(peer: IpAddr) -> Option<Iface> {
    let local = if peer.is_loopback() {
        peer
    } else {
        let bind: SocketAddr = match peer {
            IpAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
            IpAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
        };
        // connect() on UDP only consults the routing table; nothing is sent.
        let s = UdpSocket::bind(bind).ok()?;
        s.connect(SocketAddr::new(peer, 9)).ok()?;
        s.local_addr().ok()?.ip()
    };
    let name = interface_with(local)?;
    Some(read_iface(Path::new("/sys/class/net"), &name))
}

/// The name of the interface holding `addr` (getifaddrs).
fn interface_with(addr: IpAddr) -> Option<String> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list we free below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr whose family says which struct it is.
        let ip = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    Some(IpAddr::from(
                        u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                    ))
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    Some(IpAddr::from(sin6.sin6_addr.s6_addr))
                }
                _ => None,
            }
        };
        if ip == Some(addr) {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            found = Some(
                unsafe { CStr::from_ptr(ifa.ifa_name) }
                    .to_string_lossy()
                    .into_owned(),
            );
            break;
        }
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// An interface's facts from sysfs under `root` (`/sys/class/net` on a live system).
pub fn read_iface(root: &Path, name: &str) -> Iface {
    let dir = root.join(name);
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .ok()
            .map(|s| s.trim().to_string())
    };
    let num = |f: &str| read(f).and_then(|s| s.parse::<i64>().ok());
    let loopback = num("type") == Some(772) || name == "lo";
    let virtual_if = loopback
        || std::fs::canonicalize(&dir)
            .map(|p| p.to_string_lossy().contains("/devices/virtual/"))
            .unwrap_or(false);
    Iface {
        name: name.to_string(),
        mtu: num("mtu").filter(|m| *m > 0).map(|m| m as u64),
        // "-1" or an EINVAL read both mean the driver does not know.
        speed_bps: num("speed").filter(|s| *s > 0).map(|s| s as f64 * 1e6),
        loopback,
        virtual_if,
    }
}

fn tcp_timestamps() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_timestamps")
        .map(|s| s.trim() != "0")
        .unwrap_or(true)
}

/// Fraction of the link's bit rate left for payload.
///
/// TCP: segments of MTU − IP − TCP − options (12 B of timestamps when enabled), one frame each.
/// UDP: a `block`-byte datagram plus its 8-byte header, fragmented into MTU-sized IP packets
/// (fragment payloads are multiples of 8; IPv6 adds an 8-byte fragment header per fragment).
pub fn payload_fraction(proto: Proto, mtu: u64, v6: bool, block: u64, timestamps: bool) -> f64 {
    let ip = if v6 { 40 } else { 20 };
    match proto {
        Proto::Tcp => {
            let payload = mtu.saturating_sub(ip + 20 + if timestamps { 12 } else { 0 });
            payload as f64 / (mtu + ETHERNET_OVERHEAD) as f64
        }
        Proto::Udp => {
            let dgram = block + 8;
            let wire = if dgram + ip <= mtu {
                dgram + ip + ETHERNET_OVERHEAD
            } else {
                let frag_hdr = if v6 { 8 } else { 0 };
                let per = (mtu - ip - frag_hdr) / 8 * 8;
                let frames = dgram.div_ceil(per.max(8));
                dgram + frames * (ip + frag_hdr + ETHERNET_OVERHEAD)
            };
            block as f64 / wire as f64
        }
    }
}

/// The goodput ceiling of a test, or why there is none. `bidir` doubles it (full duplex).
pub fn throughput_peak(
    iface: Option<&Iface>,
    spec: &Spec,
    proto: Proto,
    v6: bool,
    block: u64,
    bidir: bool,
) -> Result<Peak, String> {
    let mtu = iface.and_then(|i| i.mtu).unwrap_or(1500).min(65_536);
    let (link, source) = match (spec.network.link_bps, iface) {
        (Some(l), _) => (l, "spec file network.link_bps".to_string()),
        (None, Some(i)) if i.loopback => {
            return Err("loopback has no wire, so no link limit: the figure measures the host's CPUs and memory"
                .into())
        }
        (None, Some(i)) if i.virtual_if => {
            return Err(format!(
                "{} is a virtual interface (veth, bridge or tun): no physical link limits it; give network.link_bps in --spec for the link behind it",
                i.name
            ))
        }
        (None, Some(Iface { speed_bps: Some(s), name, .. })) => {
            (*s, format!("{name} link {} Mbit/s (sysfs)", s / 1e6))
        }
        (None, Some(i)) => {
            return Err(format!(
                "link speed of {} unknown (sysfs reports none); give network.link_bps in --spec",
                i.name
            ))
        }
        (None, None) => {
            return Err("the interface to the peer was not found; give network.link_bps in --spec".into())
        }
    };
    let ts = tcp_timestamps();
    let frac = payload_fraction(proto, mtu, v6, block, ts);
    let dirs = if bidir { 2.0 } else { 1.0 };
    let what = match proto {
        Proto::Tcp => format!(
            "TCP/IPv{} payload{} at MTU {mtu}",
            if v6 { 6 } else { 4 },
            if ts { " with timestamps" } else { "" }
        ),
        Proto::Udp => format!(
            "{block} B UDP/IPv{} datagrams at MTU {mtu}",
            if v6 { 6 } else { 4 }
        ),
    };
    Ok(Peak {
        value: link * frac * dirs,
        basis: format!(
            "{source} x {:.2} % goodput ({what}, Ethernet framing 38 B/frame){}",
            frac * 100.0,
            if bidir { " x 2 directions" } else { "" }
        ),
    })
}

/// The latency floor: only what the spec file states (there is no honest theoretical RTT).
pub fn latency_peak(spec: &Spec) -> Option<Peak> {
    spec.network.base_latency_s.map(|s| Peak {
        value: s,
        basis: "spec file network.base_latency_s (round trip)".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodput_fractions_match_the_research_table() {
        // 1500 TCP/IPv4 + timestamps: 1448 / 1538 = 94.15 %.
        let f = payload_fraction(Proto::Tcp, 1500, false, 0, true);
        assert!((f - 0.9415).abs() < 1e-4, "{f}");
        // IPv6: 1428 / 1538 = 92.85 %.
        let f = payload_fraction(Proto::Tcp, 1500, true, 0, true);
        assert!((f - 0.9285).abs() < 1e-4, "{f}");
        // 1472 B UDP in one frame: 1472 / 1538 = 95.71 %.
        let f = payload_fraction(Proto::Udp, 1500, false, 1472, true);
        assert!((f - 0.9571).abs() < 1e-4, "{f}");
        // 9000 MTU TCP: 8948 / 9038 = 99.00 %.
        let f = payload_fraction(Proto::Tcp, 9000, false, 0, true);
        assert!((f - 0.9900).abs() < 1e-4, "{f}");
        // A 32 KiB datagram over 1500 MTU: 23 fragments of 1480 B.
        let f = payload_fraction(Proto::Udp, 1500, false, 32_768, true);
        let wire = 32_776 + 23 * (20 + 38);
        assert!((f - 32_768.0 / wire as f64).abs() < 1e-9, "{f}");
    }

    fn iface(name: &str, speed: Option<f64>, lo: bool, virt: bool) -> Iface {
        Iface {
            name: name.into(),
            mtu: Some(1500),
            speed_bps: speed,
            loopback: lo,
            virtual_if: virt,
        }
    }

    #[test]
    fn peaks_and_their_absence_are_explained() {
        let spec = Spec::default();
        let e = throughput_peak(
            Some(&iface("lo", None, true, true)),
            &spec,
            Proto::Tcp,
            false,
            0,
            false,
        )
        .expect_err("loopback");
        assert!(e.contains("no wire"), "{e}");
        let e = throughput_peak(
            Some(&iface("veth0", Some(1e10), false, true)),
            &spec,
            Proto::Tcp,
            false,
            0,
            false,
        )
        .expect_err("veth");
        assert!(e.contains("virtual"), "{e}");
        let e = throughput_peak(
            Some(&iface("eth0", None, false, false)),
            &spec,
            Proto::Tcp,
            false,
            0,
            false,
        )
        .expect_err("unknown");
        assert!(e.contains("unknown"), "{e}");
        let p = throughput_peak(
            Some(&iface("eth0", Some(1e10), false, false)),
            &spec,
            Proto::Tcp,
            false,
            0,
            true,
        )
        .expect("10G");
        assert!(
            (p.value - 2.0 * 1e10 * 1448.0 / 1538.0).abs() < 1.0,
            "{p:?}"
        );
        assert!(
            p.basis.contains("eth0") && p.basis.contains("2 directions"),
            "{}",
            p.basis
        );
        let spec = Spec::parse("[network]\nlink_bps = 25e9\n").expect("spec");
        let p = throughput_peak(
            Some(&iface("lo", None, true, true)),
            &spec,
            Proto::Tcp,
            false,
            0,
            false,
        )
        .expect("spec wins");
        assert!(p.basis.contains("spec"), "{}", p.basis);
    }

    #[test]
    fn sysfs_facts_are_read_and_unknown_speed_is_normal() {
        let root = std::env::temp_dir().join(format!("hb-sysnet-{}", std::process::id()));
        let eth = root.join("eth9");
        std::fs::create_dir_all(&eth).expect("dir");
        std::fs::write(eth.join("mtu"), "9000\n").expect("w");
        std::fs::write(eth.join("speed"), "-1\n").expect("w");
        std::fs::write(eth.join("type"), "1\n").expect("w");
        let i = read_iface(&root, "eth9");
        assert_eq!(i.mtu, Some(9000));
        assert_eq!(i.speed_bps, None);
        assert!(!i.loopback);
        std::fs::write(eth.join("speed"), "25000\n").expect("w");
        assert_eq!(read_iface(&root, "eth9").speed_bps, Some(25e9));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn loopback_routes_to_lo() {
        let i = route("127.0.0.1".parse().expect("ip")).expect("lo exists");
        assert!(i.loopback, "{i:?}");
    }
}
