//! What the kernel saw during a case: deltas of its TCP and UDP counters (`/proc/net/snmp`,
//! `/proc/net/netstat`, `/proc/net/snmp6`) over the case's whole run.
//!
//! A throughput figure with retransmits behind it, or a UDP figure whose datagrams died in a
//! full receive buffer, means something different from a clean one: the first is a path that
//! drops, the second a receiver that cannot keep up. The counters say which, so every network
//! record carries the deltas (`extra.kernel`), and a throughput record whose case saw TCP
//! retransmits or UDP receive errors gets a warning the report shows.
//!
//! The counters belong to the network namespace of the process reading them (the client's, or
//! both ends on loopback) and count every socket in it, so traffic from other programs in the
//! same namespace is included: the record says so.

use std::collections::BTreeMap;

/// The counters kept, as `Group.Name`: retransmits and timeouts, receive and send buffer drops,
/// listen-queue overflows, checksum and other input errors.
const KEPT: [&str; 14] = [
    "Tcp.RetransSegs",
    "Tcp.InErrs",
    "Tcp.OutRsts",
    "TcpExt.TCPTimeouts",
    "TcpExt.TCPLostRetransmit",
    "TcpExt.ListenOverflows",
    "TcpExt.ListenDrops",
    "TcpExt.TCPBacklogDrop",
    "Udp.InErrors",
    "Udp.RcvbufErrors",
    "Udp.SndbufErrors",
    "Udp.NoPorts",
    "Udp6.InErrors",
    "Udp6.RcvbufErrors",
];

/// The counters whose growth in a throughput case is flagged.
const FLAGGED: [&str; 5] = [
    "Tcp.RetransSegs",
    "Udp.InErrors",
    "Udp.RcvbufErrors",
    "Udp6.InErrors",
    "Udp6.RcvbufErrors",
];

/// A reading of the kept counters; empty where procfs is unreadable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters(BTreeMap<String, u64>);

impl Counters {
    /// This namespace's counters now.
    pub fn read() -> Self {
        let text = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        Self::parse(
            &text("/proc/net/snmp"),
            &text("/proc/net/netstat"),
            &text("/proc/net/snmp6"),
        )
    }

    /// From the three files' text: `snmp` and `netstat` hold a header line of names and a line
    /// of values per group (`Tcp: RtoAlgorithm …` / `Tcp: 1 …`); `snmp6` one `Udp6InErrors 0`
    /// per line.
    pub fn parse(snmp: &str, netstat: &str, snmp6: &str) -> Self {
        let mut all = BTreeMap::new();
        for text in [snmp, netstat] {
            let lines: Vec<&str> = text.lines().collect();
            for pair in lines.chunks(2) {
                let [names, values] = pair else { continue };
                let (Some((g1, names)), Some((g2, values))) =
                    (names.split_once(':'), values.split_once(':'))
                else {
                    continue;
                };
                if g1 != g2 {
                    continue;
                }
                for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
                    // Some counters (Tcp MaxConn) are signed; those are not kept anyway.
                    if let Ok(v) = v.parse::<u64>() {
                        all.insert(format!("{g1}.{n}"), v);
                    }
                }
            }
        }
        for line in snmp6.lines() {
            let mut it = line.split_whitespace();
            if let (Some(name), Some(v)) = (it.next(), it.next()) {
                if let (Some(rest), Ok(v)) = (name.strip_prefix("Udp6"), v.parse::<u64>()) {
                    all.insert(format!("Udp6.{rest}"), v);
                }
            }
        }
        Self(
            all.into_iter()
                .filter(|(k, _)| KEPT.contains(&k.as_str()))
                .collect(),
        )
    }

    /// What grew from `before` to `self`, counter by counter (counters read in both only).
    pub fn since(&self, before: &Counters) -> BTreeMap<String, u64> {
        self.0
            .iter()
            .filter_map(|(k, &now)| before.0.get(k).map(|&b| (k.clone(), now.saturating_sub(b))))
            .collect()
    }
}

/// The warning for a throughput case whose deltas show retransmits or receive drops, if any.
pub fn flag(delta: &BTreeMap<String, u64>) -> Option<String> {
    let seen: Vec<String> = FLAGGED
        .iter()
        .filter_map(|k| {
            delta
                .get(*k)
                .filter(|&&v| v > 0)
                .map(|v| format!("{k} +{v}"))
        })
        .collect();
    (!seen.is_empty()).then(|| {
        format!(
            "the kernel counted {} during this case (this host's namespace, every socket): \
             retransmits mean a path that drops, receive errors a receiver that cannot keep up",
            seen.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives
Ip: 1 64 1000
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 10 10 0 0 2 500 600 7 1 3 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 100 2 5 100 4 0 0 0 0
";
    const NETSTAT: &str = "\
TcpExt: SyncookiesSent TCPTimeouts ListenOverflows ListenDrops
TcpExt: 0 9 1 1
IpExt: InNoRoutes
IpExt: 0
";
    const SNMP6: &str = "Udp6InDatagrams 10\nUdp6InErrors 2\nUdp6RcvbufErrors 1\n";

    #[test]
    fn counters_parse_and_deltas_flag_drops() {
        let before = Counters::parse(SNMP, NETSTAT, SNMP6);
        assert_eq!(before.0["Tcp.RetransSegs"], 7);
        assert_eq!(before.0["Udp.RcvbufErrors"], 4);
        assert_eq!(before.0["TcpExt.TCPTimeouts"], 9);
        assert_eq!(before.0["Udp6.InErrors"], 2);
        assert!(!before.0.contains_key("Tcp.MaxConn") && !before.0.contains_key("Ip.InReceives"));
        let after = Counters::parse(&SNMP.replace("600 7 1 3 0", "900 19 1 3 0"), NETSTAT, SNMP6);
        let d = after.since(&before);
        assert_eq!(d["Tcp.RetransSegs"], 12);
        assert_eq!(d["Udp.InErrors"], 0);
        let w = flag(&d).expect("flagged");
        assert!(w.contains("Tcp.RetransSegs +12"), "{w}");
        assert_eq!(flag(&before.since(&before)), None);
        // Unreadable procfs: nothing read, nothing claimed.
        assert!(Counters::parse("", "", "").since(&before).is_empty());
        let live = Counters::read();
        assert!(live.since(&live).values().all(|&v| v == 0));
    }
}
