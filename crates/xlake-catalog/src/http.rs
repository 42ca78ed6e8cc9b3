//! The HTTP side of the network catalogs (REST, Glue): one client per catalog, and
//! requests sent again after a transient failure.

#[cfg(any(feature = "rest", feature = "glue"))]
use crate::error::{CatalogError, Result};
#[cfg(any(feature = "rest", feature = "glue"))]
use crate::target::{redact, CatalogTarget};

/// The HTTP client a network catalog (REST, Glue) talks through: one 30 s timeout per
/// request; a client that cannot be built is a configuration error naming the catalog.
#[cfg(any(feature = "rest", feature = "glue"))]
pub(crate) fn http_client(target: &CatalogTarget) -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| CatalogError::Config {
            catalog: redact(&target.uri),
            reason: e.to_string(),
        })
}

/// Catalog requests this process sent again after a transient failure (see [`retries`]).
static RETRIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many network catalog requests (REST, Glue) this process sent again after a
/// transient failure since it started (serve exports it in `/metrics`).
pub fn retries() -> u64 {
    RETRIES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Send `req` and read its answer, trying again as storage does
/// ([`xlake_storage::RetryPolicy::default`]: 4 attempts, jittered doubling pauses from
/// 200 ms) when it failed in transit (unreachable, reset, timed out, answer cut short) or
/// the server answered 429 or 503 (busy: nothing done). A pointer move sent again after
/// its answer was lost hears that the entry moved already, which the compare-and-swap
/// loop then reads ([`crate::pointer`]). The last status and body, or the last error.
#[cfg(any(feature = "rest", feature = "glue"))]
pub(crate) async fn send_retrying(
    req: reqwest::RequestBuilder,
) -> std::result::Result<(u16, Vec<u8>), reqwest::Error> {
    let policy = xlake_storage::RetryPolicy::default();
    let mut bound = policy.first_backoff;
    let mut attempt = 1;
    loop {
        // Only a streamed body cannot be cloned; catalogs send JSON.
        let Some(this) = req.try_clone() else {
            return send_once(req).await;
        };
        let outcome = send_once(this).await;
        let transient = match &outcome {
            Err(_) => true,
            Ok((status, _)) => matches!(status, 429 | 503),
        };
        if !transient || attempt >= policy.attempts {
            return outcome;
        }
        RETRIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pause = xlake_storage::jittered(bound);
        tracing::warn!(attempt, "transient catalog failure; retrying in {pause:?}");
        tokio::time::sleep(pause).await;
        bound = (bound * 2).min(policy.max_backoff);
        attempt += 1;
    }
}

#[cfg(any(feature = "rest", feature = "glue"))]
async fn send_once(
    req: reqwest::RequestBuilder,
) -> std::result::Result<(u16, Vec<u8>), reqwest::Error> {
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    Ok((status, resp.bytes().await?.to_vec()))
}
