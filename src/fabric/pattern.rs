//! Which pairs run in which step, per pattern (`--pattern`), computed one
//! step at a time: rank 0 asks for a step's pairs (to fill its matrix), every
//! other rank only for its own part in it, so no rank but rank 0 ever holds
//! more than O(N) of the plan (alltoall's single step has N(N-1) pairs).

use super::schedule;

/// One measured pair: the client (perftest's side with a server name; the
/// writer for write-bw) measures, the server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pair {
    pub client: usize,
    pub server: usize,
}

impl Pair {
    pub fn new(client: usize, server: usize) -> Pair {
        Pair { client, server }
    }
}

/// `--direction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Lower rank to higher (one measurement per pair).
    Uni,
    /// Both directions at once (perftest's `-b`), reported on the pair's lower→higher cell.
    Bi,
    /// Lower→higher in one step, then higher→lower in the next.
    Both,
}

impl Direction {
    pub fn parse(s: &str) -> Result<Direction, String> {
        match s {
            "uni" => Ok(Direction::Uni),
            "bi" => Ok(Direction::Bi),
            "both" => Ok(Direction::Both),
            _ => Err(format!("--direction {s:?}: use uni, bi or both")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Direction::Uni => "uni",
            Direction::Bi => "bi",
            Direction::Both => "both",
        }
    }
}

/// `--pattern` (and `--pairs-file`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Round-robin 1-factorisation: every pair once.
    Pairs,
    /// Lower half against upper half, all at once.
    Bisection,
    /// K senders to one receiver per step; the receiver rotates over every rank.
    Incast(usize),
    /// Every rank to every other rank at once.
    AllToAll,
    /// Explicit steps (one per line) of `client:server` pairs.
    File(Vec<Vec<Pair>>),
}

impl Pattern {
    /// `--pattern NAME [K]` as given (`incast K` or `incast:K`).
    pub fn parse(s: &str) -> Result<Pattern, String> {
        let (name, arg) = match s.split_once([':', '=', ' ']) {
            Some((a, b)) => (a, Some(b.trim())),
            None => (s, None),
        };
        match (name, arg) {
            ("pairs", None) => Ok(Pattern::Pairs),
            ("bisection", None) => Ok(Pattern::Bisection),
            ("alltoall", None) => Ok(Pattern::AllToAll),
            ("incast", Some(k)) => match k.parse::<usize>() {
                Ok(k) if k >= 1 => Ok(Pattern::Incast(k)),
                _ => Err(format!("--pattern incast {k:?}: K must be a whole number >= 1 (senders per receiver), e.g. --pattern incast 2")),
            },
            ("incast", None) => Err("--pattern incast needs K (senders per receiver): --pattern incast 2".into()),
            _ => Err(format!("--pattern {s:?}: use pairs, bisection, incast K, alltoall (or --pairs-file F)")),
        }
    }

    pub fn name(&self) -> String {
        match self {
            Pattern::Pairs => "pairs".into(),
            Pattern::Bisection => "bisection".into(),
            Pattern::Incast(k) => format!("incast {k}"),
            Pattern::AllToAll => "alltoall".into(),
            Pattern::File(_) => "file".into(),
        }
    }

    /// Refuses a pattern that cannot run on `n` ranks.
    pub fn check(&self, n: usize) -> Result<(), String> {
        if n < 2 {
            return Err(format!(
                "fabric needs at least 2 ranks (got {n}): start it with mpirun -np N (N >= 2), one rank per NIC"
            ));
        }
        match self {
            Pattern::Incast(k) if *k >= n => Err(format!(
                "--pattern incast {k}: K senders need K+1 <= {n} ranks; use K <= {}",
                n - 1
            )),
            Pattern::File(steps) => {
                for (i, s) in steps.iter().enumerate() {
                    for p in s {
                        if p.client >= n || p.server >= n {
                            return Err(format!(
                                "--pairs-file step {}: pair {}:{} names a rank >= {n} (ranks are 0..{}); fix the file or start more ranks",
                                i + 1,
                                p.client,
                                p.server,
                                n - 1
                            ));
                        }
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// A pattern laid out for `n` ranks, `--direction` and `--serial` applied.
#[derive(Clone, Debug)]
pub struct Plan {
    pub pattern: Pattern,
    pub n: usize,
    pub direction: Direction,
    pub serial: bool,
}

/// This rank's part in one pair of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Role {
    pub pair: Pair,
    /// True when this rank is the pair's client (it measures).
    pub client: bool,
}

impl Role {
    pub fn peer(&self) -> usize {
        if self.client {
            self.pair.server
        } else {
            self.pair.client
        }
    }
}

impl Plan {
    pub fn new(
        pattern: Pattern,
        n: usize,
        direction: Direction,
        serial: bool,
    ) -> Result<Plan, String> {
        pattern.check(n)?;
        Ok(Plan {
            pattern,
            n,
            direction,
            serial,
        })
    }

    /// Steps of the pattern before `--direction both` and `--serial` expand them.
    fn base_steps(&self) -> usize {
        match &self.pattern {
            Pattern::Pairs => schedule::steps(self.n),
            Pattern::Bisection | Pattern::AllToAll => 1,
            Pattern::Incast(_) => self.n,
            Pattern::File(s) => s.len(),
        }
    }

    /// Whether `both` doubles the steps (alltoall and files already name
    /// each direction).
    fn doubles(&self) -> bool {
        self.direction == Direction::Both
            && !matches!(self.pattern, Pattern::AllToAll | Pattern::File(_))
    }

    /// Pairs of base step `b`, lower→higher orientation (O(pairs)).
    fn base_pairs(&self, b: usize) -> Vec<Pair> {
        let n = self.n;
        match &self.pattern {
            Pattern::Pairs => schedule::step(n, b)
                .into_iter()
                .map(|(a, c)| Pair::new(a, c))
                .collect(),
            Pattern::Bisection => (0..n / 2).map(|i| Pair::new(i, i + n / 2)).collect(),
            Pattern::Incast(k) => (1..=*k).map(|j| Pair::new((b + j) % n, b)).collect(),
            Pattern::AllToAll => (0..n)
                .flat_map(|a| {
                    (0..n)
                        .filter(move |&c| c != a)
                        .map(move |c| Pair::new(a, c))
                })
                .collect(),
            Pattern::File(s) => s[b].clone(),
        }
    }

    /// Pairs of base step `b` that involve `me` (O(N) at most).
    fn base_pairs_of(&self, b: usize, me: usize) -> Vec<Pair> {
        let n = self.n;
        match &self.pattern {
            Pattern::Pairs => schedule::partner(n, b, me)
                .map(|o| Pair::new(me.min(o), me.max(o)))
                .into_iter()
                .collect(),
            Pattern::AllToAll => (0..n)
                .filter(|&o| o != me)
                .flat_map(|o| [Pair::new(me, o), Pair::new(o, me)])
                .collect(),
            _ => self
                .base_pairs(b)
                .into_iter()
                .filter(|p| p.client == me || p.server == me)
                .collect(),
        }
    }

    /// (base step, reversed, serial index) of step `i`.
    fn locate(&self, i: usize) -> (usize, bool, Option<usize>) {
        let d = if self.doubles() { 2 } else { 1 };
        if !self.serial {
            return (i / d, i % d == 1, None);
        }
        // Serial: every pair its own step, in base-step order.
        let mut left = i;
        for b in 0..self.base_steps() {
            let len = self.base_pairs(b).len() * d;
            if left < len {
                return (b, left % d == 1, Some(left / d));
            }
            left -= len;
        }
        (usize::MAX, false, None)
    }

    /// Number of steps.
    pub fn steps(&self) -> usize {
        let d = if self.doubles() { 2 } else { 1 };
        if self.serial {
            (0..self.base_steps())
                .map(|b| self.base_pairs(b).len() * d)
                .sum()
        } else {
            self.base_steps() * d
        }
    }

    /// Every pair of step `i` (rank 0).
    pub fn pairs(&self, i: usize) -> Vec<Pair> {
        let (b, rev, one) = self.locate(i);
        if b == usize::MAX {
            return Vec::new();
        }
        let mut v = self.base_pairs(b);
        if let Some(k) = one {
            v = vec![v[k]];
        }
        if rev {
            v.iter_mut()
                .for_each(|p| *p = Pair::new(p.server, p.client));
        }
        v
    }

    /// Rank `me`'s roles in step `i` (every rank; O(N) at most).
    pub fn roles(&self, i: usize, me: usize) -> Vec<Role> {
        let (b, rev, one) = self.locate(i);
        if b == usize::MAX {
            return Vec::new();
        }
        let mine = if one.is_some() {
            self.pairs(i)
                .into_iter()
                .filter(|p| p.client == me || p.server == me)
                .collect()
        } else {
            let mut v = self.base_pairs_of(b, me);
            if rev {
                v.iter_mut()
                    .for_each(|p| *p = Pair::new(p.server, p.client));
            }
            v
        };
        mine.into_iter()
            .map(|pair| Role {
                pair,
                client: pair.client == me,
            })
            .collect()
    }
}

/// Parses a `--pairs-file`: one step per line, pairs as `CLIENT:SERVER`
/// (ranks) separated by spaces or commas; `#` starts a comment; blank lines
/// are skipped.
pub fn parse_pairs_file(text: &str) -> Result<Vec<Vec<Pair>>, String> {
    let mut steps = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut step: Vec<Pair> = Vec::new();
        for tok in line.split([' ', ',', '\t']).filter(|t| !t.is_empty()) {
            let bad = || {
                format!(
                    "--pairs-file line {}: {tok:?} is not a pair; write CLIENT:SERVER ranks, e.g. 0:1 2:3",
                    ln + 1
                )
            };
            let (a, b) = tok.split_once(':').ok_or_else(bad)?;
            let (a, b) = (
                a.parse::<usize>().map_err(|_| bad())?,
                b.parse::<usize>().map_err(|_| bad())?,
            );
            if a == b {
                return Err(format!(
                    "--pairs-file line {}: {tok}: a rank cannot be paired with itself",
                    ln + 1
                ));
            }
            let p = Pair::new(a, b);
            if step.contains(&p) {
                return Err(format!(
                    "--pairs-file line {}: {tok} appears twice in the step",
                    ln + 1
                ));
            }
            step.push(p);
        }
        steps.push(step);
    }
    if steps.is_empty() {
        return Err(
            "--pairs-file: no pairs in the file; write one step per line, e.g. 0:1 2:3".into(),
        );
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn plan(p: Pattern, n: usize, d: Direction, serial: bool) -> Plan {
        Plan::new(p, n, d, serial).unwrap()
    }

    /// roles() agrees with pairs() for every rank and step.
    fn consistent(pl: &Plan) {
        for i in 0..pl.steps() {
            let all: HashSet<Pair> = pl.pairs(i).into_iter().collect();
            let mut from_roles = HashSet::new();
            for me in 0..pl.n {
                for r in pl.roles(i, me) {
                    assert!(all.contains(&r.pair), "{pl:?} step {i} rank {me}: {r:?}");
                    assert_eq!(r.client, r.pair.client == me);
                    if r.client {
                        from_roles.insert(r.pair);
                    }
                }
            }
            assert_eq!(all, from_roles, "{pl:?} step {i}");
        }
    }

    #[test]
    fn pairs_uni_serial_and_both() {
        for n in 2..=9 {
            let c = plan(Pattern::Pairs, n, Direction::Uni, false);
            assert_eq!(c.steps(), schedule::steps(n));
            consistent(&c);
            let s = plan(Pattern::Pairs, n, Direction::Uni, true);
            assert_eq!(s.steps(), n * (n - 1) / 2);
            assert!((0..s.steps()).all(|i| s.pairs(i).len() == 1));
            consistent(&s);
            let b = plan(Pattern::Pairs, n, Direction::Both, false);
            assert_eq!(b.steps(), 2 * schedule::steps(n));
            let ordered: HashSet<Pair> = (0..b.steps()).flat_map(|i| b.pairs(i)).collect();
            assert_eq!(ordered.len(), n * (n - 1), "both: every ordered pair");
            consistent(&b);
            consistent(&plan(Pattern::Pairs, n, Direction::Both, true));
        }
    }

    #[test]
    fn bisection_incast_alltoall() {
        let b = plan(Pattern::Bisection, 5, Direction::Uni, false);
        assert_eq!(b.steps(), 1);
        assert_eq!(b.pairs(0), vec![Pair::new(0, 2), Pair::new(1, 3)]);
        assert!(b.roles(0, 4).is_empty());
        consistent(&b);
        let ic = plan(Pattern::Incast(2), 4, Direction::Uni, false);
        assert_eq!(ic.steps(), 4);
        assert_eq!(ic.pairs(3), vec![Pair::new(0, 3), Pair::new(1, 3)]);
        consistent(&ic);
        let a = plan(Pattern::AllToAll, 5, Direction::Uni, false);
        assert_eq!(a.steps(), 1);
        assert_eq!(a.pairs(0).len(), 20);
        assert_eq!(a.roles(0, 3).len(), 8);
        consistent(&a);
        consistent(&plan(Pattern::AllToAll, 4, Direction::Uni, true));
        assert!(Plan::new(Pattern::Incast(4), 4, Direction::Uni, false).is_err());
        assert!(Plan::new(Pattern::Pairs, 1, Direction::Uni, false).is_err());
    }

    #[test]
    fn parse_patterns_and_files() {
        assert_eq!(Pattern::parse("incast 3").unwrap(), Pattern::Incast(3));
        assert_eq!(Pattern::parse("incast:2").unwrap(), Pattern::Incast(2));
        assert!(Pattern::parse("incast").unwrap_err().contains("needs K"));
        assert!(Pattern::parse("ring").unwrap_err().contains("use pairs"));
        let f = parse_pairs_file("# steps\n0:1 2:3\n\n1:0, 3:2 # back\n").unwrap();
        assert_eq!(
            f,
            vec![
                vec![Pair::new(0, 1), Pair::new(2, 3)],
                vec![Pair::new(1, 0), Pair::new(3, 2)]
            ]
        );
        assert!(parse_pairs_file("0-1").unwrap_err().contains("line 1"));
        assert!(parse_pairs_file("1:1").unwrap_err().contains("itself"));
        assert!(parse_pairs_file("\n#x\n").is_err());
        let e = Plan::new(Pattern::File(f), 3, Direction::Uni, false).unwrap_err();
        assert!(e.contains("rank >= 3"), "{e}");
    }
}
