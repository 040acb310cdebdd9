//! `-u USER|UID` and `-g GROUP|GID`: numbers as they are, names looked up once on rank 0 (so
//! that 256 ranks don't ask the directory service 256 times; [`crate::engine::ids`]) and
//! broadcast.

use crate::engine::ids::{id_of, IdKind};
use steal::{Comm, CommExt};

/// The owner and group to give, `None` for "leave as is".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Owner {
    /// New user id.
    pub uid: Option<u32>,
    /// New group id.
    pub gid: Option<u32>,
}

impl Owner {
    /// True when neither is to change.
    pub fn is_none(&self) -> bool {
        self.uid.is_none() && self.gid.is_none()
    }
}

/// Resolve `user` and `group` (names or numbers; `+N` is always a number). `Err` is the same
/// message on every rank. Collective: one broadcast.
pub fn resolve(comm: &dyn Comm, user: Option<&str>, group: Option<&str>) -> Result<Owner, String> {
    comm.bcast_with(0, || {
        Ok(Owner {
            uid: user.map(|u| id_of(u, IdKind::User)).transpose()?,
            gid: group.map(|g| id_of(g, IdKind::Group)).transpose()?,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_resolve_on_every_rank() {
        for ranks in [1, 3] {
            let out = steal::local::run(ranks, |comm| {
                (
                    resolve(comm, Some("1234"), Some("+5678")),
                    resolve(comm, Some("root"), Some("root")),
                    resolve(comm, None, Some("0")),
                    resolve(comm, Some("no-such-user-mfu"), None),
                    resolve(comm, None, Some("4294967295")),
                )
            });
            for (nums, names, group_only, missing, minus_one) in out {
                assert_eq!(
                    nums,
                    Ok(Owner {
                        uid: Some(1234),
                        gid: Some(5678)
                    })
                );
                assert_eq!(
                    names,
                    Ok(Owner {
                        uid: Some(0),
                        gid: Some(0)
                    })
                );
                assert_eq!(
                    group_only,
                    Ok(Owner {
                        uid: None,
                        gid: Some(0)
                    })
                );
                assert!(missing.unwrap_err().contains("no such user"));
                assert!(minus_one.unwrap_err().contains("invalid group id"));
            }
        }
    }
}
