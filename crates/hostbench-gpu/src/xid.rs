//! XID events while `hostbench burn` runs: NVML's XID critical-error events on every GPU, waited
//! for in a background thread from before the burn starts until it ends, and judged afterwards.
//!
//! Why events and not the kernel log alone: the health reading's `health.xid` counts the driver's
//! XID lines in `/dev/kmsg`, which needs root where `kernel.dmesg_restrict` is set and shares a
//! ring buffer that a busy node overwrites; NVML hands each XID to every process that registered
//! for it, as it happens, with the GPU it came from, so the burn can say which GPU and when.
//!
//! What fails follows NVIDIA's XID catalogue (the table is `hostbench_core::health::xid_meaning`,
//! shared with `health.xid`): during a burn any XID is a fail reason except the ones an
//! application's own fault raises as a rule (13, 31, 43, 45), which are a warning because the
//! burn's own kernel could have caused them. A watch that could not start (no NVML, no GPU, no
//! permission) says why; it is never read as "no XIDs".

use std::ffi::{c_int, c_uint, c_ulonglong, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hostbench_core::health::xid_meaning;
use hostbench_core::model::Severity;
use serde::{Deserialize, Serialize};

use crate::health::{bus, why_unread};
use crate::nvml::load;

type Device = *mut c_void;
type EventSet = *mut c_void;
type Ret = c_int;
type Wait = unsafe extern "C" fn(EventSet, *mut EventData, c_uint) -> Ret;

/// NVML's `nvmlEventTypeXidCriticalError`.
pub const EVENT_XID_CRITICAL: u64 = 0x8;
/// `NVML_ERROR_TIMEOUT`: the wait ended with no event.
const TIMEOUT: Ret = 10;
/// How long one wait blocks: about the longest `finish` waits for the thread to see its stop flag.
const WAIT_MS: c_uint = 200;
/// How long the waits after the stop flag block: they only drain events already queued.
const DRAIN_MS: c_uint = 20;

/// NVML's `nvmlEventData_t` (API v11 on: 32 bytes; older drivers fill only the first 24, and the
/// two instance ids are not read).
#[repr(C)]
#[derive(Debug)]
pub(crate) struct EventData {
    device: Device,
    event_type: c_ulonglong,
    /// The XID for an XID event (999 for one NVML does not know).
    event_data: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

impl Default for EventData {
    fn default() -> Self {
        EventData {
            device: std::ptr::null_mut(),
            event_type: 0,
            event_data: 0,
            gpu_instance_id: 0,
            compute_instance_id: 0,
        }
    }
}

/// One XID a GPU raised during the watch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XidEvent {
    /// NVML's index of the GPU (`gpu0` in `health.gpu`).
    pub gpu: u32,
    /// Its PCI address ("0000:41:00.0"), where NVML told it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    pub xid: u64,
    /// Seconds from the watch's start.
    pub at_s: f64,
}

/// What the watch saw (`xid` in the burn record).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct XidReport {
    /// The GPUs watched, by NVML index.
    pub watched: Vec<u32>,
    pub events: Vec<XidEvent>,
    /// Why the watch, or a GPU's part of it, did not run, or when waiting broke off: what was
    /// not watched is listed, never read as "no XIDs".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_watched: Vec<String>,
}

impl XidReport {
    /// The report of a watch that could not start.
    pub fn unwatched(why: String) -> XidReport {
        XidReport {
            not_watched: vec![format!("XID events not watched: {why}")],
            ..XidReport::default()
        }
    }
}

/// A GPU's NVML handle (as an address, to find the GPU an event names), index and PCI address.
type Gpus = Vec<(usize, u32, Option<String>)>;

/// The event set, moved into the watching thread.
struct Set(EventSet);

// SAFETY: NVML is thread-safe (its documentation: simultaneous calls from several threads are
// allowed); the set is used by the watching thread alone once it is moved there.
unsafe impl Send for Set {}

/// A running watch; `finish` stops it and returns what it saw. Dropping it also stops it.
pub struct XidWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<(Vec<XidEvent>, Vec<String>)>>,
    watched: Vec<u32>,
    not_watched: Vec<String>,
}

impl XidWatch {
    /// Register for XID events on every GPU NVML lists and start waiting for them; why not where
    /// NVML is absent, lists no GPU, or no GPU's events could be registered.
    pub fn start() -> Result<XidWatch, String> {
        let lib = load()?;
        // SAFETY: `register` calls NVML's documented functions on the library just loaded.
        let (set, gpus, not_watched) = unsafe { register(&lib)? };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let set = Set(set);
        let watched = gpus.iter().map(|(_, i, _)| *i).collect();
        let began = Instant::now();
        let thread = std::thread::Builder::new()
            .name("hostbench-xid".into())
            .spawn(move || {
                let set = set;
                // SAFETY: nvmlEventSetWait_v2's documented signature; the set came from
                // nvmlEventSetCreate on this library and is freed only after the loop ends.
                let seen = unsafe {
                    match lib.get::<Wait>(b"nvmlEventSetWait_v2\0") {
                        Ok(wait) => watch(&flag, began, &gpus, |d, ms| wait(set.0, d, ms)),
                        Err(_) => (
                            Vec::new(),
                            vec!["XID events not watched: NVML has no nvmlEventSetWait_v2".into()],
                        ),
                    }
                };
                // SAFETY: the set is no longer waited on. NVML shuts down when `lib` drops,
                // after it.
                unsafe {
                    if let Ok(free) =
                        lib.get::<unsafe extern "C" fn(EventSet) -> Ret>(b"nvmlEventSetFree\0")
                    {
                        free(set.0);
                    }
                }
                seen
            })
            .map_err(|e| format!("cannot start the XID watch's thread: {e}"))?;
        Ok(XidWatch {
            stop,
            thread: Some(thread),
            watched,
            not_watched,
        })
    }

    /// Stop waiting (within one wait, 200 ms, and the drain of what is queued) and return what
    /// was seen.
    pub fn finish(mut self) -> XidReport {
        let (events, broke) = self.join();
        let mut not_watched = std::mem::take(&mut self.not_watched);
        not_watched.extend(broke);
        XidReport {
            watched: std::mem::take(&mut self.watched),
            events,
            not_watched,
        }
    }

    fn join(&mut self) -> (Vec<XidEvent>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(seen)) => seen,
            Some(Err(_)) => (
                Vec::new(),
                vec!["XID events: the watching thread panicked".into()],
            ),
            None => (Vec::new(), Vec::new()),
        }
    }
}

impl Drop for XidWatch {
    fn drop(&mut self) {
        self.join();
    }
}

/// Create the event set and register every GPU's XID events in it: the set, the GPUs registered
/// and why the others were not.
///
/// # Safety
/// `lib` is NVML, initialised.
unsafe fn register(lib: &libloading::Library) -> Result<(EventSet, Gpus, Vec<String>), String> {
    type Count = unsafe extern "C" fn(*mut c_uint) -> Ret;
    type ByIndex = unsafe extern "C" fn(c_uint, *mut Device) -> Ret;
    type Create = unsafe extern "C" fn(*mut EventSet) -> Ret;
    type Register = unsafe extern "C" fn(Device, c_ulonglong, EventSet) -> Ret;
    type Free = unsafe extern "C" fn(EventSet) -> Ret;
    let sym = |name: &str| format!("NVML has no {name}");
    // SAFETY: NVML's documented signatures; out-pointers are locals that outlive each call, and
    // handles come from NVML and live as long as `lib`.
    unsafe {
        let count = lib
            .get::<Count>(b"nvmlDeviceGetCount_v2\0")
            .map_err(|_| sym("nvmlDeviceGetCount_v2"))?;
        let by_index = lib
            .get::<ByIndex>(b"nvmlDeviceGetHandleByIndex_v2\0")
            .map_err(|_| sym("nvmlDeviceGetHandleByIndex_v2"))?;
        let create = lib
            .get::<Create>(b"nvmlEventSetCreate\0")
            .map_err(|_| sym("nvmlEventSetCreate"))?;
        let register = lib
            .get::<Register>(b"nvmlDeviceRegisterEvents\0")
            .map_err(|_| sym("nvmlDeviceRegisterEvents"))?;
        let free = lib
            .get::<Free>(b"nvmlEventSetFree\0")
            .map_err(|_| sym("nvmlEventSetFree"))?;
        // Looked up here too so that a driver without it is told before any GPU is called watched.
        lib.get::<Wait>(b"nvmlEventSetWait_v2\0")
            .map_err(|_| sym("nvmlEventSetWait_v2"))?;
        let mut n: c_uint = 0;
        let rc = count(&mut n);
        if rc != 0 {
            return Err(format!("nvmlDeviceGetCount_v2 failed (NVML error {rc})"));
        }
        if n == 0 {
            return Err("NVML lists no GPU".into());
        }
        let mut set: EventSet = std::ptr::null_mut();
        let rc = create(&mut set);
        if rc != 0 || set.is_null() {
            return Err(format!("nvmlEventSetCreate failed (NVML error {rc})"));
        }
        let mut gpus = Vec::new();
        let mut not_watched = Vec::new();
        for i in 0..n {
            let mut dev: Device = std::ptr::null_mut();
            let mut rc = by_index(i, &mut dev);
            if rc == 0 && !dev.is_null() {
                rc = register(dev, EVENT_XID_CRITICAL, set);
            }
            if rc == 0 {
                gpus.push((dev as usize, i, bus(lib, dev)));
            } else {
                not_watched.push(format!(
                    "XID events not watched on gpu{i}: {} ({rc})",
                    why_unread(rc)
                ));
            }
        }
        if gpus.is_empty() {
            free(set);
            return Err(not_watched.join("; "));
        }
        Ok((set, gpus, not_watched))
    }
}

/// Wait (`wait(data, timeout_ms)`) for events until `stop` is set, then drain what is queued
/// (an XID raised just before the stop, or before the thread first waited, still counts): each XID
/// event on a known GPU, and each distinct wait failure once (a lost GPU fails every wait),
/// pausing one wait's time after a failure so a broken set does not spin.
fn watch(
    stop: &AtomicBool,
    began: Instant,
    gpus: &Gpus,
    mut wait: impl FnMut(&mut EventData, c_uint) -> Ret,
) -> (Vec<XidEvent>, Vec<String>) {
    let mut events = Vec::new();
    let mut broke: Vec<(Ret, String)> = Vec::new();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let mut d = EventData::default();
        let rc = wait(&mut d, if stopping { DRAIN_MS } else { WAIT_MS });
        let at_s = began.elapsed().as_secs_f64();
        match rc {
            0 if d.event_type & EVENT_XID_CRITICAL != 0 => {
                let gpu = gpus.iter().find(|(h, _, _)| *h == d.device as usize);
                events.push(XidEvent {
                    gpu: gpu.map_or(u32::MAX, |g| g.1),
                    bus: gpu.and_then(|g| g.2.clone()),
                    xid: d.event_data,
                    at_s,
                });
            }
            0 => {}
            TIMEOUT if stopping => break,
            TIMEOUT => {}
            rc => {
                if !broke.iter().any(|(r, _)| *r == rc) {
                    broke.push((
                        rc,
                        format!("XID events: waiting failed at {at_s:.1} s (NVML error {rc})"),
                    ));
                }
                if stopping {
                    break;
                }
                std::thread::sleep(Duration::from_millis(u64::from(WAIT_MS)));
            }
        }
    }
    (events, broke.into_iter().map(|(_, s)| s).collect())
}

/// "gpu0 (0000:41:00.0)", or the GPU's index alone where its address is unknown.
fn who(e: &XidEvent) -> String {
    let gpu = if e.gpu == u32::MAX {
        "a GPU NVML did not name".to_string()
    } else {
        format!("gpu{}", e.gpu)
    };
    match &e.bus {
        Some(b) => format!("{gpu} ({b})"),
        None => gpu,
    }
}

/// What an XID seen during the burn means for it, and the words for the line: `Fail` for any XID
/// but the application-caused ones, which are `Warn` (the burn's own kernel could cause them).
pub fn burn_severity(xid: u64) -> (Severity, String) {
    match xid_meaning(xid) {
        Some((Severity::Info, w)) => (
            Severity::Warn,
            format!("{w}; the burn's own kernel could have caused it"),
        ),
        Some((_, w)) => (Severity::Fail, w.to_string()),
        None => (Severity::Fail, "see NVIDIA's XID catalog".to_string()),
    }
}

/// The events as verdict lines, one per GPU and XID in the order first seen: `Fail` for any XID
/// but the application-caused ones, which are `Warn` (the burn's own kernel could cause them).
pub fn judge(events: &[XidEvent]) -> Vec<(Severity, String)> {
    let mut groups: Vec<(&XidEvent, usize)> = Vec::new();
    for e in events {
        match groups
            .iter_mut()
            .find(|(g, _)| g.gpu == e.gpu && g.xid == e.xid)
        {
            Some((_, n)) => *n += 1,
            None => groups.push((e, 1)),
        }
    }
    groups
        .into_iter()
        .map(|(e, n)| {
            let when = if n == 1 {
                format!("at {:.1} s", e.at_s)
            } else {
                format!("x{n}, first at {:.1} s", e.at_s)
            };
            let (severity, what) = burn_severity(e.xid);
            (
                severity,
                format!("{}: XID {} {when} during the burn ({what})", who(e), e.xid),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    fn ev(gpu: u32, xid: u64, at_s: f64) -> XidEvent {
        XidEvent {
            gpu,
            bus: Some(format!("0000:{:02x}:00.0", 0x41 + gpu)),
            xid,
            at_s,
        }
    }

    #[test]
    fn the_event_data_struct_has_nvmls_layout() {
        assert_eq!(size_of::<EventData>(), 32);
        assert_eq!(offset_of!(EventData, event_type), 8);
        assert_eq!(offset_of!(EventData, event_data), 16);
        assert_eq!(offset_of!(EventData, gpu_instance_id), 24);
        assert_eq!(offset_of!(EventData, compute_instance_id), 28);
    }

    #[test]
    fn hardware_xids_fail_application_ones_warn_and_unknown_ones_fail() {
        let j = judge(&[
            ev(0, 13, 1.0),
            ev(1, 79, 2.54),
            ev(0, 13, 3.0),
            ev(0, 94, 4.0),
            ev(0, 150, 5.0),
        ]);
        let sev: Vec<Severity> = j.iter().map(|(s, _)| *s).collect();
        assert_eq!(
            sev,
            [
                Severity::Warn,
                Severity::Fail,
                Severity::Fail,
                Severity::Fail
            ]
        );
        assert!(
            j[0].1
                .starts_with("gpu0 (0000:41:00.0): XID 13 x2, first at 1.0 s during the burn"),
            "{}",
            j[0].1
        );
        assert!(j[0].1.contains("burn's own kernel"), "{}", j[0].1);
        assert_eq!(
            j[1].1,
            "gpu1 (0000:42:00.0): XID 79 at 2.5 s during the burn (GPU has fallen off the bus)"
        );
        assert!(j[2].1.contains("contained ECC error"), "{}", j[2].1);
        assert!(j[3].1.contains("see NVIDIA's XID catalog"), "{}", j[3].1);
        for xid in [31, 43, 45] {
            assert_eq!(judge(&[ev(0, xid, 0.0)])[0].0, Severity::Warn, "{xid}");
        }
        for xid in [48, 63, 64, 95] {
            assert_eq!(judge(&[ev(0, xid, 0.0)])[0].0, Severity::Fail, "{xid}");
        }
        assert!(judge(&[]).is_empty());
    }

    #[test]
    fn the_loop_keeps_xid_events_names_their_gpu_and_reports_a_failing_wait_once() {
        let dev = 0x1650usize;
        let gpus: Gpus = vec![(dev, 3, Some("0000:c1:00.0".into()))];
        let stop = AtomicBool::new(false);
        let mut step = 0;
        let (events, broke) = watch(&stop, Instant::now(), &gpus, |d, _| {
            step += 1;
            match step {
                1 => TIMEOUT,
                2 => {
                    // A clock-change event: not an XID.
                    d.device = dev as Device;
                    d.event_type = 0x10;
                    0
                }
                3 | 4 => {
                    d.device = dev as Device;
                    d.event_type = EVENT_XID_CRITICAL;
                    d.event_data = 48;
                    0
                }
                5 | 6 => 15, // NVML_ERROR_GPU_IS_LOST
                _ => {
                    stop.store(true, Ordering::Relaxed);
                    TIMEOUT
                }
            }
        });
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(
            (events[0].gpu, events[0].xid, events[0].bus.as_deref()),
            (3, 48, Some("0000:c1:00.0"))
        );
        assert_eq!(broke.len(), 1, "{broke:?}");
        assert!(broke[0].contains("NVML error 15"), "{}", broke[0]);
    }

    #[test]
    fn events_queued_before_the_stop_are_drained() {
        let dev = 0x1650usize;
        let gpus: Gpus = vec![(dev, 0, None)];
        let stop = AtomicBool::new(true);
        let mut queued = vec![79u64, 13];
        let mut timeouts = Vec::new();
        let (events, broke) = watch(&stop, Instant::now(), &gpus, |d, ms| match queued.pop() {
            Some(x) => {
                d.device = dev as Device;
                d.event_type = EVENT_XID_CRITICAL;
                d.event_data = x;
                0
            }
            None => {
                timeouts.push(ms);
                TIMEOUT
            }
        });
        let xids: Vec<u64> = events.iter().map(|e| e.xid).collect();
        assert_eq!(xids, [13, 79]);
        assert!(broke.is_empty());
        assert_eq!(timeouts, [DRAIN_MS], "one short wait ends the drain");
    }

    #[test]
    fn without_nvml_the_watch_says_why() {
        if crate::nvml::load().is_ok() {
            // A host with NVML: the watch must start or say why, and stop on finish.
            match XidWatch::start() {
                Ok(w) => {
                    let r = w.finish();
                    assert!(!r.watched.is_empty());
                }
                Err(why) => assert!(!why.is_empty()),
            }
            return;
        }
        let why = XidWatch::start().err().expect("no NVML: no watch");
        assert!(why.contains("NVML"), "{why}");
        let r = XidReport::unwatched(why);
        assert!(r.watched.is_empty() && r.events.is_empty());
        assert!(r.not_watched[0].starts_with("XID events not watched: NVML"));
    }
}
