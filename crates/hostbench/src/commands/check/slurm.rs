//! `hostbench check --drain/--resume`: the verdict acted on in Slurm, as LBNL NHC does from a
//! `HealthCheckProgram`: a failing node drained with the reason "hostbench: <why>", a node that
//! hostbench drained resumed once it passes, and a node drained by anyone else (any other
//! reason) never touched. The node is named as Slurm names it: `SLURMD_NODENAME` (slurmd sets it
//! for the health check, Prolog and Epilog), else the one node whose NodeName, NodeHostName or
//! NodeAddr is this host's name or one of its addresses; never a guess from the hostname alone.
//! The scontrol calls and their parsing are the fleet crate's.

use hostbench_core::check::Verdict;
use hostbench_core::BenchError;
use hostbench_fleet::slurm;

/// What marks a drain as hostbench's own (and so one `--resume` may undo).
pub const PREFIX: &str = "hostbench:";

/// This node's Slurm name, or a bad-input error saying why --drain/--resume cannot work here.
pub fn this_node(flag: &str) -> Result<String, BenchError> {
    let outside = |why: String| BenchError::invalid(format!("{flag}: not under Slurm: {why}"));
    // slurmd runs HealthCheckProgram (and Prolog/Epilog) with no PATH at all: look where a
    // shell without one would, and where Slurm's packages put their tools.
    if std::env::var_os("PATH").is_none_or(|p| p.is_empty()) {
        std::env::set_var(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/slurm/bin",
        );
    }
    if slurm::require("scontrol").is_err() {
        return Err(outside("`scontrol` is not on PATH".into()));
    }
    if let Some(n) = std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|n| !n.trim().is_empty())
    {
        return Ok(n.trim().to_string());
    }
    let nodes = slurm::show_nodes(None).map_err(|e| outside(e.to_string()))?;
    let mut mine = own_names();
    mine.extend(own_addresses());
    let found: Vec<&slurm::NodeRecord> = nodes
        .iter()
        .filter(|n| {
            [&n.addr, &n.hostname]
                .iter()
                .any(|v| !v.is_empty() && mine.iter().any(|m| m == *v))
        })
        .collect();
    match found.as_slice() {
        [one] => Ok(one.name.clone()),
        [] => Err(outside(format!(
            "no node in `scontrol show node` has this host's name or addresses as its \
             NodeHostName or NodeAddr ({}), and SLURMD_NODENAME is not set",
            mine.join(", ")
        ))),
        many => Err(outside(format!(
            "several nodes match this host ({}); set SLURMD_NODENAME",
            many.iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// This host's name, full and short.
fn own_names() -> Vec<String> {
    let full = own_hostname();
    let mut v = vec![full.clone()];
    if let Some((short, _)) = full.split_once('.') {
        v.push(short.to_string());
    }
    v.retain(|n| !n.is_empty());
    v
}

/// This host's name as its UTS namespace has it (what slurmd in a container or test namespace
/// sees too).
pub fn own_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// This host's IPv4 and IPv6 addresses (every interface's), as text.
fn own_addresses() -> Vec<String> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we only read and then free once.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points at a sockaddr whose family says which struct it is.
            let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: family AF_INET: a sockaddr_in.
                let a = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                out.push(std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)).to_string());
            } else if family == libc::AF_INET6 {
                // SAFETY: family AF_INET6: a sockaddr_in6.
                let a = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                out.push(std::net::Ipv6Addr::from(a.sin6_addr.s6_addr).to_string());
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: the list from getifaddrs above, freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// Act on the verdict: drain on a fail (`treat_as_fail` also for an unknown under
/// `--unknown-is fail`), resume on a pass; one line per thing done or deliberately not done.
/// A failing scontrol is said, not fatal: the verdict and its exit code stand.
pub fn act(
    node: &str,
    verdict: Verdict,
    reason: &str,
    treat_as_fail: bool,
    drain: bool,
    resume: bool,
) -> Vec<String> {
    let mut said = Vec::new();
    let passes = matches!(verdict, Verdict::Pass | Verdict::Warn);
    if !((drain && treat_as_fail) || (resume && passes)) {
        return said;
    }
    let now = match slurm::show_nodes(Some(node)) {
        Ok(v) => v.into_iter().find(|n| n.name == node),
        Err(e) => {
            said.push(format!("slurm: node {node} left as it is: {e}"));
            return said;
        }
    };
    let Some(now) = now else {
        said.push(format!(
            "slurm: node {node} left as it is: scontrol does not know it"
        ));
        return said;
    };
    let theirs = now
        .reason
        .as_deref()
        .filter(|r| now.drained() && !r.starts_with(PREFIX));
    let ours = now.drained() && now.reason.as_deref().is_some_and(|r| r.starts_with(PREFIX));
    if let Some(r) = theirs {
        said.push(format!(
            "slurm: node {node} left drained as it is: drained by someone else (\"{r}\")"
        ));
        return said;
    }
    if drain && treat_as_fail {
        let want = slurm::fit_reason(&format!("{PREFIX} {reason}"));
        if ours && now.reason.as_deref() == Some(want.as_str()) {
            said.push(format!("slurm: node {node} already drained: \"{want}\""));
        } else {
            match slurm::drain(node, &want) {
                Ok(()) => said.push(format!("slurm: node {node} drained: \"{want}\"")),
                Err(e) => said.push(format!("slurm: could not drain node {node}: {e}")),
            }
        }
    } else if resume && passes && ours {
        let was = now.reason.unwrap_or_default();
        match slurm::resume(node) {
            Ok(()) => said.push(format!("slurm: node {node} resumed (was \"{was}\")")),
            Err(e) => said.push(format!("slurm: could not resume node {node}: {e}")),
        }
    }
    said
}
