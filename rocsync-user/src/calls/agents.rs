//! Agent sets, and the rule for concurrent captures over them (rocprofiler-sdk's SPM
//! rule): captures may run at the same time only on disjoint agent sets, and one with no
//! restriction claims every agent. The daemon admits or refuses trace requests with it.

use std::{collections::BTreeSet, fmt};

use serde::{Deserialize, Serialize};

/// The agents (GPU devices, by ordinal) a capture or a daemon session records: one type
/// from `--agents` to the kernel's mask and back into the trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AgentSet {
    #[default]
    All,
    Only(BTreeSet<u32>),
}

/// The kernel's masks have a bit per agent.
const MAX_AGENT: u32 = 63;

impl AgentSet {
    /// Parses `--agents 1,3` (ordinals 0 to 63).
    pub fn parse(s: &str) -> Result<AgentSet, String> {
        let mut set = BTreeSet::new();
        for part in s.split(',') {
            let n: u32 = part.trim().parse().map_err(|_| {
                format!("{part:?} is not an agent ordinal (0, 1, …); e.g. --agents 1,3")
            })?;
            if n > MAX_AGENT {
                return Err(format!("{s:?}: agent ordinals go from 0 to {MAX_AGENT}"));
            }
            set.insert(n);
        }
        Ok(AgentSet::Only(set))
    }

    /// The kernel's bit mask: bit N records agent N; 0 records every agent.
    pub fn mask(&self) -> u64 {
        match self {
            AgentSet::All => 0,
            AgentSet::Only(a) => a.iter().fold(0, |m, d| m | 1 << d),
        }
    }

    /// The set a kernel mask records.
    pub fn from_mask(mask: u64) -> AgentSet {
        match mask {
            0 => AgentSet::All,
            m => AgentSet::Only((0..=MAX_AGENT).filter(|d| m & 1 << d != 0).collect()),
        }
    }

    pub fn overlaps(&self, other: &AgentSet) -> bool {
        match (self, other) {
            (AgentSet::All, _) | (_, AgentSet::All) => true,
            (AgentSet::Only(a), AgentSet::Only(b)) => !a.is_disjoint(b),
        }
    }

    pub fn contains(&self, agent: u32) -> bool {
        match self {
            AgentSet::All => true,
            AgentSet::Only(a) => a.contains(&agent),
        }
    }

    /// As `--agents` takes it (`1,3`); `None` for every agent.
    pub fn list(&self) -> Option<String> {
        match self {
            AgentSet::All => None,
            AgentSet::Only(a) => {
                let list: Vec<String> = a.iter().map(u32::to_string).collect();
                Some(list.join(","))
            }
        }
    }

    /// As a trace's parameters say it: `null` for every agent.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            AgentSet::All => serde_json::Value::Null,
            only => only.to_string().into(),
        }
    }
}

impl fmt::Display for AgentSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.list() {
            None => f.write_str("all agents"),
            Some(l) => write!(f, "agents {l}"),
        }
    }
}

/// On the daemon's socket as `--agents` takes it (`"1,3"`), `null` for every agent.
impl Serialize for AgentSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.list().serialize(s)
    }
}

impl<'de> Deserialize<'de> for AgentSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(AgentSet::All),
            Some(s) => AgentSet::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ClaimId(u64);

impl fmt::Display for ClaimId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ClaimError {
    #[error(
        "cannot start session {name:?} on {wanted}: session {other:?} already records {theirs}; \
         sessions may only run together on disjoint agent sets"
    )]
    Overlap {
        name: String,
        wanted: AgentSet,
        other: String,
        theirs: AgentSet,
    },
    #[error("no running session {0:?}")]
    Unknown(ClaimId),
}

struct Claim {
    id: ClaimId,
    name: String,
    agents: AgentSet,
}

#[derive(Default)]
pub(crate) struct AgentClaims {
    running: Vec<Claim>,
    next: u64,
}

impl AgentClaims {
    /// Starts a session, unless it would share an agent with a running one.
    pub(crate) fn start(&mut self, name: &str, agents: AgentSet) -> Result<ClaimId, ClaimError> {
        if let Some(other) = self.running.iter().find(|s| s.agents.overlaps(&agents)) {
            return Err(ClaimError::Overlap {
                name: name.into(),
                wanted: agents,
                other: other.name.clone(),
                theirs: other.agents.clone(),
            });
        }
        self.next += 1;
        let id = ClaimId(self.next);
        self.running.push(Claim {
            id,
            name: name.into(),
            agents,
        });
        Ok(id)
    }

    pub(crate) fn stop(&mut self, id: ClaimId) -> Result<(), ClaimError> {
        let i = self
            .running
            .iter()
            .position(|s| s.id == id)
            .ok_or(ClaimError::Unknown(id))?;
        self.running.remove(i);
        Ok(())
    }

    /// The session that records `agent`, if any: at most one, by the rule above (the
    /// tests' view of the rule).
    #[cfg(test)]
    fn owner(&self, agent: u32) -> Option<ClaimId> {
        self.running
            .iter()
            .find(|s| s.agents.contains(agent))
            .map(|s| s.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(a: &[u32]) -> AgentSet {
        AgentSet::Only(a.iter().copied().collect())
    }

    #[test]
    fn disjoint_sessions_coexist_and_own_their_agents() {
        let mut s = AgentClaims::default();
        let a = s.start("a", only(&[0, 2])).unwrap();
        let b = s.start("b", only(&[1])).unwrap();
        assert_eq!(s.owner(2), Some(a));
        assert_eq!(s.owner(1), Some(b));
        assert_eq!(s.owner(3), None);
    }

    #[test]
    fn an_overlapping_start_is_refused_naming_the_other_session() {
        let mut s = AgentClaims::default();
        s.start("training", only(&[1, 3])).unwrap();
        let err = s.start("probe", only(&[3, 4])).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("\"training\"") && text.contains("agents 1,3"),
            "{text}"
        );
        assert_eq!(s.owner(4), None, "a refused session claims nothing");
    }

    #[test]
    fn an_unrestricted_session_claims_every_agent() {
        let mut s = AgentClaims::default();
        let all = s.start("all", AgentSet::All).unwrap();
        assert!(s.start("one", only(&[7])).is_err());
        assert_eq!(s.owner(7), Some(all));
        s.stop(all).unwrap();
        s.start("one", only(&[7])).unwrap();
        assert!(
            s.start("all", AgentSet::All).is_err(),
            "all overlaps any running session"
        );
    }

    #[test]
    fn a_stopped_session_frees_its_agents_and_cannot_stop_twice() {
        let mut s = AgentClaims::default();
        let a = s.start("a", only(&[0])).unwrap();
        s.stop(a).unwrap();
        assert_eq!(s.stop(a), Err(ClaimError::Unknown(a)));
        s.start("again", only(&[0])).unwrap();
    }

    #[test]
    fn parses_agent_lists() {
        assert_eq!(AgentSet::parse("1,3"), Ok(only(&[1, 3])));
        assert_eq!(AgentSet::parse(" 2 "), Ok(only(&[2])));
        assert!(AgentSet::parse("1,x").unwrap_err().contains("\"x\""));
        assert!(AgentSet::parse("").is_err());
        assert!(AgentSet::parse("63").is_ok());
        assert!(AgentSet::parse("1,64").unwrap_err().contains("0 to 63"));
    }

    #[test]
    fn masks_and_the_wire_round_trip() {
        assert_eq!(only(&[0, 2]).mask(), 0b101);
        assert_eq!(AgentSet::All.mask(), 0);
        for set in [AgentSet::All, only(&[0]), only(&[1, 3, 63])] {
            assert_eq!(AgentSet::from_mask(set.mask()), set);
            let wire = serde_json::to_string(&set).unwrap();
            assert_eq!(serde_json::from_str::<AgentSet>(&wire).unwrap(), set);
        }
        assert_eq!(serde_json::to_string(&only(&[1, 3])).unwrap(), "\"1,3\"");
        assert!(serde_json::from_str::<AgentSet>("\"99\"").is_err());
    }
}
