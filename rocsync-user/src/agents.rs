//! Agent sets, and the rule for concurrent captures over them (rocprofiler-sdk's SPM
//! rule): captures may run at the same time only on disjoint agent sets, and one with no
//! restriction claims every agent. The daemon admits or refuses trace requests with it.

use std::{collections::BTreeSet, fmt};

/// The agents a session records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentSet {
    All,
    Only(BTreeSet<u32>),
}

impl AgentSet {
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
}

impl AgentSet {
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
}

impl fmt::Display for AgentSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.list() {
            None => f.write_str("all agents"),
            Some(l) => write!(f, "agents {l}"),
        }
    }
}

/// Parses `--agents 1,3`.
pub fn parse_agents(s: &str) -> Result<AgentSet, String> {
    let mut set = BTreeSet::new();
    for part in s.split(',') {
        let n: u32 = part.trim().parse().map_err(|_| {
            format!("{part:?} is not an agent ordinal (0, 1, …); e.g. --agents 1,3")
        })?;
        set.insert(n);
    }
    Ok(AgentSet::Only(set))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimId(u64);

impl fmt::Display for ClaimId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
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
pub struct AgentClaims {
    running: Vec<Claim>,
    next: u64,
}

impl AgentClaims {
    /// Starts a session, unless it would share an agent with a running one.
    pub fn start(&mut self, name: &str, agents: AgentSet) -> Result<ClaimId, ClaimError> {
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

    pub fn stop(&mut self, id: ClaimId) -> Result<(), ClaimError> {
        let i = self
            .running
            .iter()
            .position(|s| s.id == id)
            .ok_or(ClaimError::Unknown(id))?;
        self.running.remove(i);
        Ok(())
    }

    /// The session that records `agent`, if any: at most one, by the rule above.
    pub fn owner(&self, agent: u32) -> Option<ClaimId> {
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
        assert_eq!(parse_agents("1,3"), Ok(only(&[1, 3])));
        assert_eq!(parse_agents(" 2 "), Ok(only(&[2])));
        assert!(parse_agents("1,x").unwrap_err().contains("\"x\""));
        assert!(parse_agents("").is_err());
    }
}
