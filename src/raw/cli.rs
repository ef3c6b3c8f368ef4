//! `rdmaperf raw-eth-bw ...` (and `raw_ethernet_bw` as a multicall name):
//! the flags and perftest's rules, then the checks made before anything is
//! opened. The raw packet run itself is not in rdmaperf yet: a command line
//! that passes every check says so and exits 2 (docs/raw-ethernet.md).

use super::args::{self, FLAGS};
use super::params::{self, RawParams};
use super::preflight;
use super::tools::RawTool;

/// The tool a subcommand names, either spelling.
pub fn tool_of(sub: &str) -> Option<RawTool> {
    RawTool::from_name(sub)
}

/// Runs `rdmaperf <raw tool> <argv>`; returns the exit status.
pub fn main(tool: RawTool, argv: &[String]) -> i32 {
    let name = tool.name();
    let parsed = args::parse(argv);
    if parsed.as_ref().is_ok_and(|a| a.has("help")) {
        print!("{}", help(tool));
        return 0;
    }
    let p = match parsed.and_then(|a| params::resolve(tool, &a)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rdmaperf {name}: {e}");
            return 2;
        }
    };
    match before_open(&p) {
        Err(e) => {
            eprintln!("{e}");
            2
        }
        Ok(dev) => {
            // perftest prints these once the device is open (check_link_and_mtu).
            for n in &p.notes {
                println!(" {n}");
            }
            eprintln!(
                "rdmaperf {name}: the command line and {dev} pass every check, but rdmaperf cannot \
                 run raw Ethernet traffic yet (its frames, rules and pre-checks are in place: \
                 docs/raw-ethernet.md): run stock {} for now",
                tool.perftest_name()
            );
            2
        }
    }
}

/// The device checks, then CAP_NET_RAW; the device's name when both pass.
fn before_open(p: &RawParams) -> Result<String, String> {
    let name = p.raw.tool.name();
    let list = crate::verbs::device::devices().map_err(|e| format!("rdmaperf {name}: {e}"))?;
    let dev =
        preflight::pick(&list, p.device.as_deref()).map_err(|e| format!("rdmaperf {name}: {e}"))?;
    let support = preflight::raw_support(std::path::Path::new(&dev.ibdev_path), dev.transport_type);
    if let Some(e) = preflight::device_refusal(&format!("rdmaperf {name}"), &dev.name, &support) {
        return Err(e);
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(e) = preflight::cap_refusal(&format!("rdmaperf {name}"), &status) {
        return Err(e);
    }
    Ok(dev.name.clone())
}

/// The flags the raw tools take, and those refused with why.
pub fn help(tool: RawTool) -> String {
    let mut s = format!(
        "Usage: rdmaperf {} --server|--client -B <source MAC> [-E <dest MAC>] [flags]\n\
         (perftest's {}; the same flags by perftest master's names)\n\nFlags:\n",
        tool.name(),
        tool.perftest_name()
    );
    for f in FLAGS.iter().filter(|f| f.refused.is_none()) {
        s.push_str(&spell(f));
    }
    s.push_str("\nRefused for raw Ethernet (perftest's rules):\n");
    for f in FLAGS.iter().filter(|f| f.refused.is_some()) {
        s.push_str(&spell(f));
    }
    s
}

fn spell(f: &args::Flag) -> String {
    let short = f.short.map(|c| format!("-{c}, ")).unwrap_or_default();
    let v = if f.value { " <value>" } else { "" };
    format!("  {short}--{}{v}\n", f.long)
}
