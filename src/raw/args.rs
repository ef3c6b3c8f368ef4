//! The raw tools' command line, read the way perftest's `getopt_long` reads
//! it: perftest master's short letters and long names, `-s 64`, `-s64`,
//! `--size 64`, `--size=64`, and bundled short switches (`-Zb`). Values stay
//! text here; `raw::params` gives them meaning and applies perftest's rules.

/// One flag the raw tools know: its letter, its long name, whether it takes
/// a value, and what becomes of it.
pub struct Flag {
    pub short: Option<char>,
    pub long: &'static str,
    pub value: bool,
    /// `None`: taken. `Some(why)`: refused before anything runs, with why and the fix.
    pub refused: Option<&'static str>,
}

const fn take(short: Option<char>, long: &'static str, value: bool) -> Flag {
    Flag {
        short,
        long,
        value,
        refused: None,
    }
}

const fn no(short: Option<char>, long: &'static str, value: bool, why: &'static str) -> Flag {
    Flag {
        short,
        long,
        value,
        refused: Some(why),
    }
}

/// The flags, by perftest master's names (perftest_parameters.c's long
/// option table and `usage_raw_ethernet`).
pub const FLAGS: &[Flag] = &[
    take(Some('d'), "ib-dev", true),
    take(Some('i'), "ib-port", true),
    take(Some('m'), "mtu", true),
    take(Some('s'), "size", true),
    take(Some('n'), "iters", true),
    take(Some('N'), "noPeak", false),
    take(Some('D'), "duration", true),
    take(Some('q'), "qp", true),
    take(Some('t'), "tx-depth", true),
    take(Some('r'), "rx-depth", true),
    take(Some('Q'), "cq-mod", true),
    take(Some('I'), "inline_size", true),
    take(Some('T'), "tos", true),
    take(Some('L'), "hop_limit", true),
    take(Some('b'), "bidirectional", false),
    take(Some('F'), "CPU-freq", false),
    take(Some('h'), "help", false),
    take(None, "report_gbits", false),
    take(Some('U'), "report-unsorted", false),
    take(Some('H'), "report-histogrm", false),
    take(Some('l'), "post_list", true),
    take(None, "post", true),
    take(Some('B'), "source_mac", true),
    take(Some('E'), "dest_mac", true),
    take(Some('J'), "dest_ip", true),
    take(Some('j'), "source_ip", true),
    take(Some('K'), "dest_port", true),
    take(Some('k'), "source_port", true),
    take(Some('Y'), "ethertype", true),
    take(Some('Z'), "server", false),
    take(Some('P'), "client", false),
    take(Some('v'), "mac_fwd", false),
    take(None, "local_mac", true),
    take(None, "remote_mac", true),
    take(None, "local_ip", true),
    take(None, "remote_ip", true),
    take(None, "local_port", true),
    take(None, "remote_port", true),
    take(None, "tcp", false),
    take(None, "raw_ipv6", false),
    take(None, "vlan_en", false),
    take(None, "vlan_pcp", true),
    take(None, "flow_label", true),
    take(None, "flows", true),
    take(None, "flows_burst", true),
    take(None, "promiscuous", false),
    take(None, "sniffer", false),
    take(None, "raw_mcast", false),
    take(None, "reply_every", true),
    take(None, "burst_size", true),
    take(None, "typical_pkt_size", true),
    take(None, "rate_limit", true),
    take(None, "rate_units", true),
    take(None, "rate_limit_type", true),
    take(None, "payload_file_path", true),
    no(Some('a'), "all", false, "Raw Ethernet tests do not support -a / --all flag (perftest's rule): give one size with -s"),
    no(Some('R'), "rdma_cm", false, "RDMA CM isn't supported for Raw Ethernet tests (perftest's rule): drop -R; raw packet QPs need no connection"),
    no(Some('z'), "comm_rdma_cm", false, "RDMA CM isn't supported for Raw Ethernet tests (perftest's rule): drop -z"),
    no(Some('x'), "gid-index", true, "GID index isn't supported for Raw Ethernet tests (perftest's rule): drop -x; the frame's addresses come from -B/-E and -J/-j"),
    no(None, "mmap", true, "mmaped files aren't supported for Raw Ethernet tests (perftest's rule): drop --mmap"),
    no(None, "pin_cores", true, "--pin_cores is not supported for raw Ethernet tests (perftest's rule): pin the process with taskset instead"),
    no(None, "numa_node", true, "--numa_node is not supported for raw Ethernet tests (perftest's rule): bind it with numactl instead"),
    no(Some('G'), "use_rss", false, "RSS isn't supported (perftest master refuses -G): drop it"),
];

/// A flag as given: the table row and its value, if it takes one.
#[derive(Clone, Debug)]
pub struct Given {
    pub long: &'static str,
    pub value: Option<String>,
}

/// A parsed command line: the flags in order, and any positional words.
#[derive(Clone, Debug, Default)]
pub struct RawArgs {
    pub given: Vec<Given>,
    pub positional: Vec<String>,
}

impl RawArgs {
    /// The last value given for `long` (perftest keeps the last one).
    pub fn value(&self, long: &str) -> Option<&str> {
        self.given
            .iter()
            .rev()
            .find(|g| g.long == long)
            .and_then(|g| g.value.as_deref())
    }

    pub fn has(&self, long: &str) -> bool {
        self.given.iter().any(|g| g.long == long)
    }
}

fn by_short(c: char) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.short == Some(c))
}

fn by_long(name: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.long == name)
}

/// The refusal of an unknown flag: naming the raw flag meant where one is
/// a near miss (`--rate-limit`, `--dest-mac`), as the other tools do.
fn unknown(flag: &str) -> String {
    let name = flag.split('=').next().unwrap_or(flag);
    let longs: Vec<String> = FLAGS.iter().map(|f| f.long.to_string()).collect();
    let meant = name
        .starts_with("--")
        .then(|| crate::cli::near_miss::meant(name, &longs))
        .flatten();
    match meant {
        Some(m) => format!(
            "{name}: not a flag of perftest's raw Ethernet tools: the flag meant is --{m}; \
             `rdmaperf <raw tool> --help` lists those it takes"
        ),
        None => format!(
            "{flag}: not a flag of perftest's raw Ethernet tools that rdmaperf takes yet; \
             `rdmaperf <raw tool> --help` lists those it does"
        ),
    }
}

/// Reads `argv` (the words after the tool's name). The first refused or
/// unknown flag, or a flag missing its value, is the error.
pub fn parse(argv: &[String]) -> Result<RawArgs, String> {
    let mut out = RawArgs::default();
    let mut it = argv.iter();
    while let Some(w) = it.next() {
        if let Some(long) = w.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let f = by_long(name).ok_or_else(|| unknown(w))?;
            let value = if f.value {
                Some(match inline {
                    Some(v) => v,
                    None => it.next().cloned().ok_or_else(|| missing(w))?,
                })
            } else if inline.is_some() {
                return Err(format!(
                    "{w}: --{name} takes no value: drop '={}'",
                    inline.unwrap_or_default()
                ));
            } else {
                None
            };
            push(&mut out, f, w, value)?;
        } else if w.len() > 1 && w.starts_with('-') {
            shorts(&mut out, w, &mut it)?;
        } else {
            out.positional.push(w.clone());
        }
    }
    Ok(out)
}

/// `-Zb`, `-s64`, `-s 64`: switches bundle, the first letter with a value
/// takes the rest of the word or the next word.
fn shorts<'a>(
    out: &mut RawArgs,
    w: &str,
    it: &mut impl Iterator<Item = &'a String>,
) -> Result<(), String> {
    for (i, c) in w.char_indices().skip(1) {
        let f = by_short(c).ok_or_else(|| unknown(&format!("-{c}")))?;
        if f.value {
            let rest = &w[i + c.len_utf8()..];
            let v = if rest.is_empty() {
                it.next()
                    .cloned()
                    .ok_or_else(|| missing(&format!("-{c}")))?
            } else {
                rest.to_string()
            };
            return push(out, f, &format!("-{c}"), Some(v));
        }
        push(out, f, &format!("-{c}"), None)?;
    }
    Ok(())
}

fn missing(flag: &str) -> String {
    format!("{flag} needs a value")
}

fn push(
    out: &mut RawArgs,
    f: &'static Flag,
    spelled: &str,
    value: Option<String>,
) -> Result<(), String> {
    if let Some(why) = f.refused {
        return Err(format!("{spelled}: {why}"));
    }
    out.given.push(Given {
        long: f.long,
        value,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_miss_names_the_raw_flag_meant() {
        let e = p("--rate-limit 5").unwrap_err();
        assert!(
            e.contains("--rate-limit: ") && e.contains("the flag meant is --rate_limit;"),
            "{e}"
        );
        let e = p("--dest-mac=02:00:00:00:00:01").unwrap_err();
        assert!(
            e.starts_with("--dest-mac: ") && e.contains("meant is --dest_mac;"),
            "{e}"
        );
        let e = p("--no_such_flag").unwrap_err();
        assert!(
            e.contains("that rdmaperf takes yet") && !e.contains("meant"),
            "{e}"
        );
    }

    fn p(s: &str) -> Result<RawArgs, String> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn every_spelling_reads_the_same() {
        for cmd in ["-s 128", "-s128", "--size 128", "--size=128"] {
            assert_eq!(p(cmd).unwrap().value("size"), Some("128"), "{cmd}");
        }
        let a = p("-Zb -B 00:01:02:03:04:05").unwrap();
        assert!(a.has("server") && a.has("bidirectional"));
        assert_eq!(a.value("source_mac"), Some("00:01:02:03:04:05"));
    }

    #[test]
    fn the_last_value_wins_and_positionals_are_kept() {
        let a = p("-s 64 --size 128 host").unwrap();
        assert_eq!(a.value("size"), Some("128"));
        assert_eq!(a.positional, ["host"]);
    }

    #[test]
    fn refusals_and_unknown_flags_name_the_flag() {
        let e = p("-Z -a").unwrap_err();
        assert!(
            e.starts_with("-a: Raw Ethernet tests do not support -a"),
            "{e}"
        );
        let e = p("--gid-index=3").unwrap_err();
        assert!(e.contains("GID index isn't supported"), "{e}");
        let e = p("--no_such").unwrap_err();
        assert!(e.starts_with("--no_such: not a flag"), "{e}");
        assert_eq!(p("-s").unwrap_err(), "-s needs a value");
        assert!(p("--tcp=1").unwrap_err().contains("takes no value"));
    }

    #[test]
    fn no_flag_is_listed_twice() {
        for (i, f) in FLAGS.iter().enumerate() {
            for g in &FLAGS[i + 1..] {
                assert_ne!(f.long, g.long);
                assert!(f.short.is_none() || f.short != g.short, "{}", f.long);
            }
        }
    }
}
