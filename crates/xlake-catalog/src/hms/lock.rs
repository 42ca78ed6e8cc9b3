//! The metastore's table lock around a pointer move, as Iceberg's `HiveTableOperations`
//! takes one by default (`MetastoreLock`) and pyiceberg's `HiveCatalog` always does: an
//! `EXCLUSIVE` lock on the table (`lock`), polled with `check_lock` while it is `WAITING`,
//! released with `unlock` after the alter, whatever the alter did.
//!
//! Hive Metastore 3.x and older ignore the conditional alter's expected parameter, so there
//! the lock is what makes read-check-alter a compare-and-swap among writers that lock (xlake,
//! Iceberg with its default, pyiceberg). On 4.x the conditional alter already is one; the lock
//! is taken there too, so one code path serves every version. Locks live in the metastore's
//! database, not in a connection, so each call may use a new connection. No heartbeat: the
//! lock is held for one read and one alter, far below the metastore's lock timeout
//! (`hive.txn.timeout`, 300 s by default), after which a lock left by a killed process is
//! released by the metastore's housekeeping.
//!
//! A metastore whose database has no lock tables (one whose schema DataNucleus created
//! rather than `schematool`) cannot lock. On Hive 4 (told by `get_table`, which 4 no longer
//! serves) the move then goes on with the conditional alter alone, with a warning; on 3.x
//! and older it is refused, since nothing would guard it.

use std::time::{Duration, Instant};

use super::wire::{Outcome, Value};
use super::HmsCatalog;
use crate::error::Requests;
use crate::{Result, TableIdent};

/// How long a move waits for another writer's lock (Iceberg's `iceberg.hive.lock-timeout-ms`).
const WAIT: Duration = Duration::from_secs(180);

/// The first and the longest pause between two `check_lock` calls (Iceberg's defaults).
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const LONGEST_PAUSE: Duration = Duration::from_secs(5);

/// `LockType.EXCLUSIVE`, `LockLevel.TABLE`, `DataOperationType.UNSET`.
const EXCLUSIVE: i32 = 3;
const TABLE: i32 = 2;
const UNSET: i32 = 5;

/// `LockState`.
const ACQUIRED: i32 = 1;
const WAITING: i32 = 2;

/// A granted table lock; [`HmsCatalog::unlock`] releases it.
pub(super) struct TableLock(i64);

impl HmsCatalog {
    /// Lock `table` exclusively, waiting up to [`WAIT`] for another writer's lock; `None`
    /// where a Hive 4 metastore cannot lock (the conditional alter guards the move there).
    pub(super) async fn lock(&self, table: &TableIdent) -> Result<Option<TableLock>> {
        let request = self.lock_request(table)?;
        let (id, mut state) = match self.lock_call("lock", request).await {
            Ok(granted) => granted,
            Err(reason) => return self.without_lock(table, reason).await,
        };
        let (start, mut pause) = (Instant::now(), FIRST_PAUSE);
        while state == WAITING && start.elapsed() < WAIT {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_PAUSE);
            let check = Value::Struct(vec![(1, Value::I64(id))]);
            let checked = self.lock_call("check_lock", check).await;
            state = checked.map_err(|reason| self.error(table, reason))?.1;
        }
        if state == ACQUIRED {
            return Ok(Some(TableLock(id)));
        }
        // Withdraw a request still waiting, so that it is not granted to nobody later.
        self.unlock(table, TableLock(id)).await;
        Err(self.error(
            table,
            if state == WAITING {
                format!(
                    "the metastore's lock on the table was not granted in {} s: another writer holds it",
                    WAIT.as_secs()
                )
            } else {
                format!("the metastore refused to lock the table (lock state {state})")
            },
        ))
    }

    /// Release `lock`. A failure is only reported: the metastore releases a lock that is not
    /// heartbeated after its timeout, and the move itself is done or refused already.
    pub(super) async fn unlock(&self, table: &TableIdent, lock: TableLock) {
        let request = Value::Struct(vec![(1, Value::I64(lock.0))]);
        match self.call(table, "unlock", vec![request]).await {
            Ok(Outcome::Returned(_)) => {}
            Ok(Outcome::Thrown(_, message)) => {
                tracing::warn!(catalog = %self.uri, %table, lock = lock.0, "unlock: {message}")
            }
            Err(e) => tracing::warn!(catalog = %self.uri, %table, lock = lock.0, "unlock: {e}"),
        }
    }

    fn lock_request(&self, table: &TableIdent) -> Result<Value> {
        let component = Value::Struct(vec![
            (1, Value::I32(EXCLUSIVE)),
            (2, Value::I32(TABLE)),
            (3, Value::str(&self.database(table)?)),
            (4, Value::str(&table.name)),
            (6, Value::I32(UNSET)),
            (7, Value::Bool(true)),
        ]);
        let user = whoami::username().unwrap_or_else(|_| "xlake".into());
        let host = whoami::hostname().unwrap_or_else(|_| "localhost".into());
        Ok(Value::Struct(vec![
            (
                1,
                Value::List(thrift::protocol::TType::Struct, vec![component]),
            ),
            (3, Value::str(&user)),
            (4, Value::str(&host)),
            (5, Value::str(concat!("xlake ", env!("CARGO_PKG_VERSION")))),
        ]))
    }

    /// `lock` or `check_lock`: the lock's id and state, or why not.
    async fn lock_call(&self, method: &str, arg: Value) -> std::result::Result<(i64, i32), String> {
        let reply = match self.try_call(method, vec![arg]).await.map_err(|(r, _)| r)? {
            Outcome::Returned(Some(reply)) => reply,
            Outcome::Returned(None) => return Err(format!("{method}: no reply")),
            Outcome::Thrown(_, message) => return Err(format!("{method}: {message}")),
        };
        match (reply.field(1), reply.field(2)) {
            (Some(Value::I64(id)), Some(Value::I32(state))) => Ok((*id, *state)),
            _ => Err(format!("{method}: a reply without lock id and state")),
        }
    }

    /// The metastore could not lock (`reason`): go on without the lock on Hive 4, whose
    /// conditional alter is a compare-and-swap, and refuse on older ones.
    async fn without_lock(&self, table: &TableIdent, reason: String) -> Result<Option<TableLock>> {
        let (db, name) = (Value::str(&self.database(table)?), Value::str(&table.name));
        match self.try_call("get_table", vec![db, name]).await {
            Err((e, _)) if e.contains("Invalid method name") => {
                tracing::warn!(catalog = %self.uri, %table,
                    "the metastore cannot lock tables ({reason}); the move relies on Hive 4's conditional alter");
                Ok(None)
            }
            _ => Err(self.error(
                table,
                format!("{reason}; a metastore older than Hive 4 ignores the conditional alter, so xlake moves the pointer only under the table lock (create the metastore's lock tables with its schematool)"),
            )),
        }
    }
}
