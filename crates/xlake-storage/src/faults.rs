//! A fault-injecting `object_store` wrapper, for tests and failure drills: it passes
//! every request to the store it wraps, except that it can fail, delay or half-complete
//! chosen requests, and can pretend the store lacks (or ignores) put-if-absent.
//!
//! ```
//! # use std::sync::Arc;
//! # use xlake_storage::faults::{FaultyStore, Fault, Op};
//! let disk = Arc::new(object_store::local::LocalFileSystem::new());
//! // The third write fails; the one after it succeeds but reports an error.
//! let store = FaultyStore::new(disk)
//!     .fault(Op::Put, 3, Fault::Fail)
//!     .fault(Op::Put, 4, Fault::LostReply);
//! ```

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// Kinds of request, counted separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Writes (plain and conditional).
    Put,
    /// Reads, including ranges and `head`.
    Get,
    /// Listings.
    List,
    /// Deletes.
    Delete,
}

/// What happens to a chosen request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The request fails and has no effect (a refused connection, a 503).
    Fail,
    /// The request waits this long, then proceeds.
    Delay(Duration),
    /// The request takes effect but the caller gets an error (a reply lost on the way
    /// back): the ambiguous failure an atomic commit must survive.
    LostReply,
    /// A read whose connection drops halfway: the first half of the body arrives, then an
    /// error. (Other requests: as [`Fault::Fail`].)
    CutShort,
}

/// How the store answers put-if-absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PutIfAbsent {
    /// As the wrapped store does.
    #[default]
    Honoured,
    /// Refused as not implemented (S3 with conditional puts disabled).
    Unsupported,
    /// Accepted and ignored: the object is overwritten (some S3-compatible servers).
    Ignored,
}

/// The wrapper; see the module docs.
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    put_if_absent: PutIfAbsent,
    faults: Vec<(Op, usize, Fault)>,
    /// From this request of this kind on, every one fails (an outage, not a blip).
    outage: Option<(Op, usize)>,
    counts: [AtomicUsize; 4],
    /// Every fault that fired, in order, for the test to assert on.
    fired: Mutex<Vec<(Op, usize, Fault)>>,
    /// The location of every read, in order (what a test counts reads of).
    read: Mutex<Vec<String>>,
}

impl FaultyStore {
    /// Wrap `inner`, with no faults yet.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            put_if_absent: PutIfAbsent::Honoured,
            faults: Vec::new(),
            outage: None,
            counts: Default::default(),
            fired: Mutex::new(Vec::new()),
            read: Mutex::new(Vec::new()),
        }
    }

    /// Answer put-if-absent as `mode` says.
    pub fn put_if_absent(mut self, mode: PutIfAbsent) -> Self {
        self.put_if_absent = mode;
        self
    }

    /// Apply `fault` to the `nth` request (counting from 1) of kind `op`.
    pub fn fault(mut self, op: Op, nth: usize, fault: Fault) -> Self {
        self.faults.push((op, nth, fault));
        self
    }

    /// Fail the `nth` request of kind `op` and every later one of that kind.
    pub fn outage_from(mut self, op: Op, nth: usize) -> Self {
        self.outage = Some((op, nth));
        self
    }

    /// Requests of kind `op` seen so far.
    pub fn count(&self, op: Op) -> usize {
        self.counts[op as usize].load(Ordering::SeqCst)
    }

    /// The locations read so far (whole or in part), in order.
    pub fn reads(&self) -> Vec<String> {
        self.read.lock().map(|r| r.clone()).unwrap_or_default()
    }

    fn note_read(&self, location: &Path) {
        if let Ok(mut read) = self.read.lock() {
            read.push(location.to_string());
        }
    }

    /// The faults that fired so far.
    pub fn fired(&self) -> Vec<(Op, usize, Fault)> {
        self.fired.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// Count a request and return the fault it gets, after any delay.
    async fn enter(&self, op: Op) -> Option<Fault> {
        let n = self.counts[op as usize].fetch_add(1, Ordering::SeqCst) + 1;
        let down = self.outage.is_some_and(|(o, from)| o == op && n >= from);
        let fault = self
            .faults
            .iter()
            .find(|(o, nth, _)| *o == op && *nth == n)
            .map(|(_, _, f)| *f)
            .or(down.then_some(Fault::Fail))?;
        if let Ok(mut fired) = self.fired.lock() {
            fired.push((op, n, fault));
        }
        match fault {
            Fault::Delay(d) => {
                tokio::time::sleep(d).await;
                None
            }
            other => Some(other),
        }
    }
}

fn injected(op: Op, location: &Path) -> object_store::Error {
    object_store::Error::Generic {
        store: "FaultyStore",
        source: format!("injected fault: {op:?} {location}").into(),
    }
}

impl fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> Result<PutResult> {
        let fault = self.enter(Op::Put).await;
        if opts.mode == PutMode::Create {
            match self.put_if_absent {
                PutIfAbsent::Honoured => {}
                PutIfAbsent::Unsupported => return Err(object_store::Error::NotImplemented),
                PutIfAbsent::Ignored => opts.mode = PutMode::Overwrite,
            }
        }
        match fault {
            Some(Fault::Fail | Fault::CutShort) => Err(injected(Op::Put, location)),
            Some(Fault::LostReply) => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(injected(Op::Put, location))
            }
            _ => self.inner.put_opts(location, payload, opts).await,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        if self.enter(Op::Put).await.is_some() {
            return Err(injected(Op::Put, location));
        }
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.note_read(location);
        match self.enter(Op::Get).await {
            None => self.inner.get_opts(location, options).await,
            Some(Fault::CutShort) => {
                let mut result = self.inner.get_opts(location, options).await?;
                let body = std::mem::replace(
                    &mut result.payload,
                    GetResultPayload::Stream(Box::pin(futures::stream::empty())),
                );
                let whole = GetResult {
                    payload: body,
                    meta: result.meta.clone(),
                    range: result.range.clone(),
                    attributes: result.attributes.clone(),
                }
                .bytes()
                .await?;
                let half = whole.slice(..whole.len() / 2);
                let error = injected(Op::Get, location);
                result.payload = GetResultPayload::Stream(Box::pin(futures::stream::iter([
                    Ok(half),
                    Err(error),
                ])));
                Ok(result)
            }
            Some(_) => Err(injected(Op::Get, location)),
        }
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.note_read(location);
        if self.enter(Op::Get).await.is_some() {
            return Err(injected(Op::Get, location));
        }
        self.inner.get_ranges(location, ranges).await
    }

    async fn delete(&self, location: &Path) -> Result<()> {
        match self.enter(Op::Delete).await {
            Some(Fault::Fail) => Err(injected(Op::Delete, location)),
            Some(_) => {
                self.inner.delete(location).await?;
                Err(injected(Op::Delete, location))
            }
            None => self.inner.delete(location).await,
        }
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        // A listing starts synchronously: delays are not injected here, failures are.
        let n = self.counts[Op::List as usize].fetch_add(1, Ordering::SeqCst) + 1;
        let fails = self.faults.iter().any(|(o, nth, f)| {
            *o == Op::List && *nth == n && matches!(f, Fault::Fail | Fault::LostReply)
        });
        if fails {
            if let Ok(mut fired) = self.fired.lock() {
                fired.push((Op::List, n, Fault::Fail));
            }
            let location = prefix.cloned().unwrap_or_default();
            return Box::pin(futures::stream::once(async move {
                Err(injected(Op::List, &location))
            }));
        }
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        if self.enter(Op::List).await.is_some() {
            return Err(injected(Op::List, &prefix.cloned().unwrap_or_default()));
        }
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy(&self, from: &Path, to: &Path) -> Result<()> {
        if self.enter(Op::Put).await.is_some() {
            return Err(injected(Op::Put, to));
        }
        self.inner.copy(from, to).await
    }

    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> Result<()> {
        if self.enter(Op::Put).await.is_some() {
            return Err(injected(Op::Put, to));
        }
        self.inner.copy_if_not_exists(from, to).await
    }
}
