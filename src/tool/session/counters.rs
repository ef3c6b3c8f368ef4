//! `-W/--report-counters`: perftest's counter deltas. Each named counter is a
//! file under /sys/class/infiniband/<dev>/ports/<port>/ (e.g.
//! `hw_counters/sent_pkts`); it is read once after the connection is set up,
//! and after each result row the change since the previous read is printed as
//! perftest prints it (`\t<name>=<delta>` lines, then an empty line).

use crate::tool::common::fail::Fail;
use std::path::PathBuf;

/// The counters of one run.
pub struct Counters {
    files: Vec<(String, PathBuf, u64)>,
}

fn read(path: &PathBuf, name: &str) -> Result<u64, Fail> {
    let t = std::fs::read_to_string(path).map_err(|e| {
        Fail::new(format!(
            "-W {name}: cannot read {}: {e}; list the port's counters with `ls {}`",
            path.display(),
            path.parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        ))
    })?;
    t.trim().parse().map_err(|_| {
        Fail::new(format!(
            "-W {name}: {} holds '{}', not a counter value",
            path.display(),
            t.trim()
        ))
    })
}

/// `-W`: the run's counters, read once now (after the connection is set up).
pub fn for_run(
    p: &crate::cli::params::Params,
    ep: &crate::tool::setup::resources::Endpoint,
) -> Result<Option<Counters>, Fail> {
    if p.counters.is_empty() {
        return Ok(None);
    }
    Counters::open(ep.ctx.name(), p.ib_port, &p.counters).map(Some)
}

impl Counters {
    /// Opens and reads every counter (the baseline).
    pub fn open(dev: &str, port: u8, names: &[String]) -> Result<Counters, Fail> {
        let base = PathBuf::from(format!("/sys/class/infiniband/{dev}/ports/{port}"));
        let mut files = Vec::with_capacity(names.len());
        for n in names {
            let path = base.join(n);
            let v = read(&path, n)?;
            files.push((n.clone(), path, v));
        }
        Ok(Counters { files })
    }

    /// The change of every counter since the last read, as perftest prints it.
    pub fn report(&mut self) -> Result<String, Fail> {
        let mut o = String::new();
        for (name, path, last) in &mut self.files {
            let v = read(path, name)?;
            o += &format!("\t{name}={}\n", v.wrapping_sub(*last));
            *last = v;
        }
        o.push('\n');
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn missing_counter_is_named() {
        let e = Counters::open("nodev", 1, &["hw_counters/x".into()])
            .err()
            .unwrap();
        assert!(e.msg.contains("-W hw_counters/x: cannot read"), "{}", e.msg);
    }
}
