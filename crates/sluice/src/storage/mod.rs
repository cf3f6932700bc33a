//! Where readers' data lives: local paths (or `file://` URIs) and object storage — `s3://`
//! (AWS and S3-compatible servers), `gs://`, `az://` / `abfs://` and `http(s)://` — through
//! `object_store`, the Apache Arrow project's crate for exactly this.
//!
//! Readers ask for whole objects (`read`, `fetch`), byte ranges (`fetch_ranges`, `read_many`)
//! and one level of a prefix (`list`); they never see a client. Each reader keeps up to
//! [`max_in_flight`] requests in flight on one small I/O runtime shared by every reader, and
//! starts the requests of its next batches before it reads them ([`ReadAhead`]); what it
//! fetched may be kept in a local folder for later epochs and other processes ([`Cache`]).
//! Every request has a timeout; timeouts, cut connections, 5xx and throttling are retried
//! with backoff (`object_store`'s policy for the request, and ours around the body, which may
//! be cut after the request succeeded); what still fails is an error naming the URI.
//!
//! Configuration is the clouds' usual: `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`
//! / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` (and the other `AWS_*` variables
//! `object_store` knows), `GOOGLE_*`, `AZURE_*`; DALI's `DALI_S3_NO_VERIFY_SSL`; and Sluice's
//! `SLUICE_STORAGE_TIMEOUT_S` (per request, default 30), `SLUICE_STORAGE_RETRIES` (default 8),
//! `SLUICE_STORAGE_IN_FLIGHT` (default 256). Credentials never appear in errors: messages name
//! the URI and what went wrong, never a request's headers.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::stream::{self, StreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, RetryConfig};

/// Whether `path` names an object in object storage (a URI with a scheme other than `file`).
pub fn is_object_uri(path: &str) -> bool {
    match path.split_once("://") {
        Some((scheme, _)) => !scheme.is_empty() && scheme != "file" && scheme.chars().all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.'),
        None => false,
    }
}

/// A local path for `path`: itself, or a `file://` URI's path.
pub fn local_path(path: &str) -> &str {
    path.strip_prefix("file://").unwrap_or(path)
}

mod ahead;
mod cache;

pub use ahead::ReadAhead;
pub use cache::Cache;

/// How a reader reaches its objects: its `storage_options` (settings of the store beyond the
/// environment, as `object_store` names them: `endpoint`, `region`, `access_key_id`,
/// `allow_http`, `timeout`, ...; for every scheme the reader's URIs use), its read-ahead and
/// request limit ([`ReadAhead`]), and its local cache (`cache_dir`, [`Cache`]). Clones share
/// the read-ahead and the cache. The settings key the store: readers with other settings get
/// their own clients.
#[derive(Clone, Default)]
pub struct Options {
    settings: Settings,
    ahead: Arc<ReadAhead>,
    cache: Option<Arc<Cache>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct Settings(Arc<Vec<(String, String)>>);

impl Options {
    /// From a reader's arguments: the `key=value` entries of `storage_options`, and
    /// `cache_dir` / `cache_dir_limit` (else `SLUICE_STORAGE_CACHE_DIR` /
    /// `SLUICE_STORAGE_CACHE_LIMIT`). The error names the argument at fault.
    pub fn from_args(args: &crate::ops::Args) -> Result<Options, (&'static str, String)> {
        let mut opts = Options::default();
        if args.has("storage_options") {
            let pairs = args
                .strs("storage_options")
                .iter()
                .map(|kv| kv.split_once('=').map(|(k, v)| (k.trim().to_ascii_lowercase(), v.to_string())).ok_or_else(|| format!("'{kv}' is not key=value")))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|m| ("storage_options", m))?;
            opts.settings = Settings(Arc::new(pairs));
        }
        let dir = if args.has("cache_dir") { args.str("cache_dir").to_string() } else { std::env::var("SLUICE_STORAGE_CACHE_DIR").unwrap_or_default() };
        if !dir.is_empty() {
            let limit = if args.has("cache_dir_limit") { args.int("cache_dir_limit") } else { env_number("SLUICE_STORAGE_CACHE_LIMIT", 0) as i64 };
            if limit < 0 {
                return Err(("cache_dir_limit", format!("must be at least 0 (0: half the free space), got {limit}")));
            }
            opts.cache = Some(Cache::open(&dir, limit as u64).map_err(|m| ("cache_dir", m))?);
        }
        Ok(opts)
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.settings.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// What tells the stores of one URI apart, beyond it: the endpoint it is read from.
    fn endpoint(&self) -> String {
        let env = ["AWS_ENDPOINT_URL", "AWS_ENDPOINT"].iter().find_map(|k| std::env::var(k).ok());
        self.get("endpoint").or(self.get("aws_endpoint_url")).or(self.get("endpoint_url")).map(str::to_string).or(env).unwrap_or_default()
    }
}

/// Applies settings to a store builder through its `with_config`: each layer of `layers` in
/// turn (keys the builder does not know are skipped, as its `from_env` skips them), then the
/// reader's `opts`, where an unknown key is an error naming it (values never appear in errors).
fn configure<B, K: std::str::FromStr>(mut builder: B, layers: &[Vec<(String, String)>], opts: &Options, with: impl Fn(B, K, String) -> B) -> Result<B, String> {
    for (k, v) in layers.iter().flatten() {
        if let Ok(key) = k.parse::<K>() {
            builder = with(builder, key, v.clone());
        }
    }
    for (k, v) in opts.settings.0.iter() {
        let key = k.parse::<K>().map_err(|_| format!("unknown storage option '{k}'"))?;
        builder = with(builder, key, v.clone());
    }
    Ok(builder)
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// Most requests one reader has in flight (`SLUICE_STORAGE_IN_FLIGHT`, default 256: at
/// 50 ms a request, 5,000 objects a second; S3 serves 5,500 GETs a second per prefix).
pub fn max_in_flight() -> usize {
    env_number("SLUICE_STORAGE_IN_FLIGHT", 256).max(1) as usize
}

fn retries() -> usize {
    env_number("SLUICE_STORAGE_RETRIES", 8) as usize
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sluice-storage")
            .enable_all()
            .build()
            .expect("the storage runtime starts")
    })
}

/// The settings of the AWS profile in use (`AWS_PROFILE`, else `default`) from the shared
/// files the AWS tools write: `AWS_SHARED_CREDENTIALS_FILE` (`~/.aws/credentials`:
/// `aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`) and `AWS_CONFIG_FILE`
/// (`~/.aws/config`, section `profile NAME`: `region`, `endpoint_url`). The environment wins
/// over them, as with the AWS SDKs.
fn aws_profile() -> HashMap<String, String> {
    let profile = std::env::var("AWS_PROFILE").or_else(|_| std::env::var("AWS_DEFAULT_PROFILE")).unwrap_or_else(|_| "default".into());
    let home = std::env::var("HOME").unwrap_or_default();
    let mut found = HashMap::new();
    let files = [
        (std::env::var("AWS_CONFIG_FILE").unwrap_or_else(|_| format!("{home}/.aws/config")), if profile == "default" { "default".to_string() } else { format!("profile {profile}") }),
        (std::env::var("AWS_SHARED_CREDENTIALS_FILE").unwrap_or_else(|_| format!("{home}/.aws/credentials")), profile.clone()),
    ];
    for (path, section) in files {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let mut inside = false;
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                inside = name.trim() == section;
            } else if let (true, Some((k, v))) = (inside, line.split_once('=')) {
                found.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
    }
    found
}

/// One store per scheme and bucket (or host), made once: clients keep their connections.
fn store_for(uri: &str, opts: &Options) -> Result<(Arc<dyn ObjectStore>, ObjectPath), String> {
    static STORES: OnceLock<Mutex<HashMap<(String, Settings), Arc<dyn ObjectStore>>>> = OnceLock::new();
    // The key is taken as written (DALI does not percent-decode keys either).
    let (scheme, rest) = uri.split_once("://").ok_or_else(|| "not a URI".to_string())?;
    let scheme = scheme.to_ascii_lowercase();
    let (host, raw_key) = rest.split_once('/').unwrap_or((rest, ""));
    let host = host.to_string();
    let key = format!("{scheme}://{host}");
    let raw_key = raw_key.trim_matches('/');
    let path = ObjectPath::parse(raw_key).unwrap_or_else(|_| ObjectPath::from(raw_key));
    let mut stores = STORES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    let key = (key, opts.settings.clone());
    if let Some(s) = stores.get(&key) {
        return Ok((s.clone(), path));
    }
    let retry = RetryConfig { max_retries: retries(), retry_timeout: Duration::from_secs(120), ..RetryConfig::default() };
    // Settings in rising precedence: Sluice's defaults, the environment's variables (read as
    // each builder's `from_env` reads them), and for S3 the AWS profile files beneath the
    // environment, then the reader's `storage_options`.
    let timeout = env_number("SLUICE_STORAGE_TIMEOUT_S", 30).max(1);
    let no_verify = std::env::var("DALI_S3_NO_VERIFY_SSL").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false" | "False"));
    let mut ours = vec![("timeout".to_string(), format!("{timeout}s")), ("connect_timeout".to_string(), "10s".to_string())];
    if no_verify {
        ours.push(("allow_invalid_certificates".into(), "true".into()));
    }
    let env = |prefix: &str| -> Vec<(String, String)> { std::env::vars().filter(|(k, _)| k.starts_with(prefix)).map(|(k, v)| (k.to_ascii_lowercase(), v)).collect() };
    let store: Arc<dyn ObjectStore> = match scheme.as_str() {
        "s3" | "s3a" => {
            let mut layers = vec![ours];
            // An endpoint over plain HTTP (a local server) is allowed to be one.
            let endpoint = opts.endpoint();
            let profile = aws_profile();
            let profile_endpoint = profile.get("endpoint_url").filter(|_| endpoint.is_empty());
            if endpoint.starts_with("http://") || profile_endpoint.is_some_and(|e| e.starts_with("http://")) {
                layers[0].push(("allow_http".into(), "true".into()));
            }
            // The profile, beneath the environment: credentials only when the environment
            // has none, the region (else us-east-1), the endpoint.
            let mut from_profile = Vec::new();
            if std::env::var("AWS_ACCESS_KEY_ID").is_err() {
                for (key, config) in [("aws_access_key_id", "access_key_id"), ("aws_secret_access_key", "secret_access_key"), ("aws_session_token", "token")] {
                    if let Some(v) = profile.get(key) {
                        from_profile.push((config.to_string(), v.clone()));
                    }
                }
            }
            from_profile.push(("region".into(), profile.get("region").map_or("us-east-1", String::as_str).to_string()));
            if let Some(e) = profile_endpoint {
                from_profile.push(("endpoint".into(), e.clone()));
            }
            layers.push(from_profile);
            layers.push(env("AWS_"));
            let b = object_store::aws::AmazonS3Builder::new().with_bucket_name(host.clone()).with_retry(retry);
            let b = configure(b, &layers, opts, |b, k, v| b.with_config(k, v))?;
            Arc::new(b.build().map_err(|e| e.to_string())?)
        }
        "gs" => {
            let mut b = object_store::gcp::GoogleCloudStorageBuilder::new().with_bucket_name(host.clone()).with_retry(retry);
            if let Ok(path) = std::env::var("SERVICE_ACCOUNT") {
                b = b.with_service_account_path(path);
            }
            Arc::new(configure(b, &[ours, env("GOOGLE_")], opts, |b, k, v| b.with_config(k, v))?.build().map_err(|e| e.to_string())?)
        }
        "az" | "abfs" | "abfss" | "adl" | "azure" => {
            let b = object_store::azure::MicrosoftAzureBuilder::new().with_url(format!("{scheme}://{host}")).with_retry(retry);
            Arc::new(configure(b, &[ours, env("AZURE_")], opts, |b, k, v| b.with_config(k, v))?.build().map_err(|e| e.to_string())?)
        }
        "http" | "https" => {
            ours.push(("allow_http".into(), "true".into()));
            let b = object_store::http::HttpBuilder::new().with_url(format!("{scheme}://{host}")).with_retry(retry);
            Arc::new(configure(b, &[ours], opts, |b, k, v| b.with_config(k, v))?.build().map_err(|e| e.to_string())?)
        }
        other => return Err(format!("unsupported storage scheme '{other}://' (use s3://, gs://, az://, http(s):// or a local path)")),
    };
    stores.insert(key, store.clone());
    Ok((store, path))
}

/// What object storage said, short: the kind of failure, the store's message (which names
/// the object but no credentials) and the causes under it that it leaves out (a certificate
/// refused, a connection refused).
fn describe(e: &object_store::Error) -> String {
    let mut text = match e {
        object_store::Error::NotFound { .. } => return "no such object (it may have been deleted)".to_string(),
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => format!("access denied: {e}"),
        _ => e.to_string(),
    };
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        cause = c.source();
    }
    without_queries(&text)
}

/// `text` with the query of every URL in it left out: a query may carry credentials (Azure
/// SAS tokens, presigned signatures).
fn without_queries(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_query = false;
    for (i, ch) in text.char_indices() {
        if in_query && (ch.is_whitespace() || ch == ')' || ch == '"' || ch == '\'') {
            in_query = false;
        }
        if !in_query && ch == '?' && text[..i].rsplit(|c: char| c.is_whitespace() || c == '(').next().is_some_and(|w| w.contains("://")) {
            in_query = true;
            out.push_str("?...");
        }
        if !in_query {
            out.push(ch);
        }
    }
    out
}

/// Attempts at a request: the store retries failed requests itself, but not a response body
/// (or listing) cut after the response began; those are retried here.
const ATTEMPTS: usize = 4;

/// Runs the request `make()` makes until it succeeds, up to [`ATTEMPTS`] times with backoff;
/// a missing object or a denied request is not retried.
async fn retrying<T, F: std::future::Future<Output = object_store::Result<T>>>(make: impl Fn() -> F) -> Result<T, String> {
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
        }
        match make().await {
            Ok(v) => return Ok(v),
            Err(e @ (object_store::Error::NotFound { .. } | object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. })) => {
                return Err(describe(&e))
            }
            Err(e) => last = describe(&e),
        }
    }
    Err(format!("{last} (after {ATTEMPTS} attempts)"))
}

/// [`retrying`], waited for.
fn with_retries<T, F: std::future::Future<Output = object_store::Result<T>>>(make: impl Fn() -> F) -> Result<T, String> {
    runtime().block_on(retrying(make))
}

/// The object's bytes, or `range` of them (checked to be all there).
async fn get(store: &dyn ObjectStore, path: &ObjectPath, range: Option<Range<u64>>) -> Result<bytes::Bytes, String> {
    let b = retrying(|| async {
        match &range {
            Some(r) => store.get_range(path, r.clone()).await,
            None => store.get(path).await?.bytes().await,
        }
    })
    .await?;
    match range {
        Some(r) if b.len() as u64 != r.end - r.start => Err(format!("the object ended early: {} of {} bytes", b.len(), r.end - r.start)),
        _ => Ok(b),
    }
}

/// Starts the request `key` on the storage runtime, holding one of the reader's request slots
/// while it runs: from the reader's cache when that has it, else from the store (and then
/// kept in the cache, off the request's path).
fn launch(key: &ahead::RequestKey, opts: &Options) -> Result<ahead::InFlight, String> {
    let (store, path) = store_for(&key.0, opts)?;
    let slots = opts.ahead.slots();
    let cache = opts.cache.clone().map(|c| (c, opts.endpoint()));
    let (uri, range) = key.clone();
    Ok(ahead::InFlight(runtime().spawn(async move {
        let _slot = slots.acquire_owned().await.map_err(|e| e.to_string())?;
        if let Some((cache, endpoint)) = &cache {
            let (cache, endpoint, uri, range) = (cache.clone(), endpoint.clone(), uri.clone(), range.clone());
            if let Ok(Some(b)) = tokio::task::spawn_blocking(move || cache.get(&endpoint, &uri, range.as_ref())).await {
                return Ok(b);
            }
        }
        let b = get(&*store, &path, range.clone()).await?;
        if let Some((cache, endpoint)) = cache {
            let kept = b.clone();
            tokio::task::spawn_blocking(move || cache.put(&endpoint, &uri, range.as_ref(), &kept));
        }
        Ok(b)
    })))
}

/// Requests `(uri, range or the whole object)`: those read ahead are taken over, the others
/// started; all run up to the reader's [`max_in_flight`] at once. Each result goes to
/// `done(i, bytes)` as it arrives. The first failure is returned as `(i, message)` (and the
/// requests still running are cancelled).
fn get_many(requests: &[(&str, Option<Range<u64>>)], opts: &Options, mut done: impl FnMut(usize, bytes::Bytes)) -> Result<(), (usize, String)> {
    let mut in_flight = Vec::with_capacity(requests.len());
    for (i, (uri, range)) in requests.iter().enumerate() {
        let key = (uri.to_string(), range.clone());
        in_flight.push(match opts.ahead.take(&key) {
            Some(request) => request,
            None => launch(&key, opts).map_err(|m| (i, m))?,
        });
    }
    runtime().block_on(async {
        let mut results: stream::FuturesUnordered<_> = in_flight.iter_mut().enumerate().map(|(i, r)| async move { (i, (&mut r.0).await) }).collect();
        while let Some((i, r)) = results.next().await {
            done(i, r.map_err(|e| (i, format!("the request stopped: {e}")))?.map_err(|m| (i, m))?);
        }
        Ok(())
    })
}

/// Starts reading ahead, for a later batch, the whole objects among `uris` (what [`fetch`]
/// will ask for then): see [`ReadAhead`].
pub fn read_ahead_objects(uris: &[&str], opts: &Options) {
    let keys = uris.iter().filter(|u| is_object_uri(u)).map(|u| (u.to_string(), None));
    opts.ahead.start(keys, |k| launch(k, opts).ok());
}

/// Starts reading ahead, for a later batch, the ranges `(source, offset, length)` of objects
/// among `reads` (the requests [`read_many`] will make for them then): see [`ReadAhead`].
pub fn read_ahead_ranges(reads: &[(&Source, u64, u64)]) {
    let mut opts = None;
    let wanted: Vec<(&str, Range<u64>)> = reads
        .iter()
        .filter_map(|(src, offset, len)| match src {
            Source::Remote { uri, opts: o, .. } => {
                opts = Some(o);
                Some((uri.as_str(), *offset..offset + len))
            }
            _ => None,
        })
        .collect();
    let Some(opts) = opts else { return };
    let keys = coalesce(&wanted, MERGE_GAP).into_iter().map(|(u, r, _)| (u.to_string(), Some(r)));
    opts.ahead.start(keys, |k| launch(k, opts).ok());
}

/// The whole object or file at `uri`.
pub fn read(uri: &str, opts: &Options) -> Result<Vec<u8>, String> {
    if !is_object_uri(uri) {
        return std::fs::read(local_path(uri)).map_err(|e| e.to_string());
    }
    let (store, path) = store_for(uri, opts)?;
    runtime().block_on(get(&*store, &path, None)).map(|b| b.to_vec())
}

/// The whole objects at `uris` (object URIs), up to [`max_in_flight`] requests at once, each
/// handed to `done(i, bytes)` as it arrives (in any order; an object asked for twice, as
/// padding repeats a sample, is requested once). The first failure is returned as
/// `(i, message)`.
pub fn fetch(uris: &[&str], opts: &Options, mut done: impl FnMut(usize, bytes::Bytes)) -> Result<(), (usize, String)> {
    // Each object once: the requests, and for each the samples waiting for it.
    let mut request_of: HashMap<&str, usize> = HashMap::new();
    let mut waiting: Vec<Vec<usize>> = Vec::new();
    for (i, u) in uris.iter().enumerate() {
        let q = *request_of.entry(u).or_insert_with(|| {
            waiting.push(Vec::new());
            waiting.len() - 1
        });
        waiting[q].push(i);
    }
    let requests: Vec<(&str, Option<Range<u64>>)> = waiting.iter().map(|w| (uris[w[0]], None)).collect();
    get_many(&requests, opts, |q, b| {
        for &i in &waiting[q] {
            done(i, b.clone());
        }
    })
    .map_err(|(q, m)| (waiting[q][0], m))
}

/// Entries one level under a folder or prefix: (sub-folder names, (file name, size)), each
/// sorted by name (byte order). Locally, symbolic links are followed (a dangling one is left
/// out) and only folders and regular files are listed.
pub struct Listing {
    pub dirs: Vec<String>,
    pub files: Vec<(String, u64)>,
}

/// One level of the folder or prefix `dir`. A prefix with nothing under it is an error (object
/// stores have no empty folders), as a missing local folder is.
pub fn list(dir: &str, opts: &Options) -> Result<Listing, String> {
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    if !is_object_uri(dir) {
        for e in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
            let e = e.map_err(|e| e.to_string())?;
            let name = e.file_name().to_string_lossy().into_owned();
            match std::fs::metadata(e.path()) {
                Ok(meta) if meta.is_dir() => dirs.push(name),
                Ok(meta) if meta.is_file() => files.push((name, meta.len())),
                _ => {}
            }
        }
    } else {
        let (store, path) = store_for(dir, opts)?;
        let prefix = (!path.as_ref().is_empty()).then_some(&path);
        let result = with_retries(|| store.list_with_delimiter(prefix))?;
        let base = |p: &ObjectPath| p.filename().unwrap_or("").to_string();
        dirs = result.common_prefixes.iter().map(base).collect();
        files = result.objects.iter().map(|o| (base(&o.location), o.size)).collect();
        if dirs.is_empty() && files.is_empty() {
            return Err("no such prefix: nothing is stored under it".into());
        }
    }
    dirs.sort();
    files.sort();
    Ok(Listing { dirs, files })
}

/// Byte ranges of objects: `ranges[i] = (uri, range)`, up to [`max_in_flight`] requests at
/// once, each handed to `done(i, bytes)` as it arrives.
pub fn fetch_ranges(ranges: &[(&str, Range<u64>)], opts: &Options, done: impl FnMut(usize, bytes::Bytes)) -> Result<(), (usize, String)> {
    let requests: Vec<(&str, Option<Range<u64>>)> = ranges.iter().map(|(u, r)| (*u, Some(r.clone()))).collect();
    get_many(&requests, opts, done)
}

/// The size of the object at `uri`.
pub fn size(uri: &str, opts: &Options) -> Result<u64, String> {
    if !is_object_uri(uri) {
        return std::fs::metadata(local_path(uri)).map(|m| m.len()).map_err(|e| e.to_string());
    }
    let (store, path) = store_for(uri, opts)?;
    with_retries(|| store.head(&path)).map(|m| m.size)
}

/// A file or an object, open for positioned reads: an open file, an object read with ranged
/// requests, or an object already fetched whole (a batch's objects are fetched together).
pub enum Source {
    Local(std::fs::File, u64),
    Remote { uri: String, len: u64, opts: Options },
    Fetched(bytes::Bytes),
}

impl Source {
    /// Opens the file, or asks the store for the object's size.
    pub fn open(path: &str, opts: &Options) -> Result<Source, String> {
        if is_object_uri(path) {
            return Ok(Source::Remote { len: size(path, opts)?, uri: path.to_string(), opts: opts.clone() });
        }
        let f = std::fs::File::open(local_path(path)).map_err(|e| e.to_string())?;
        let len = f.metadata().map_err(|e| e.to_string())?.len();
        Ok(Source::Local(f, len))
    }

    pub fn len(&self) -> u64 {
        match self {
            Source::Local(_, n) | Source::Remote { len: n, .. } => *n,
            Source::Fetched(b) => b.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_remote(&self) -> bool {
        matches!(self, Source::Remote { .. })
    }

    /// Reads up to `dst.len()` bytes at `offset`; returns how many there were.
    pub fn read_at_most(&self, dst: &mut [u8], offset: u64) -> Result<usize, String> {
        let n = (dst.len() as u64).min(self.len().saturating_sub(offset)) as usize;
        match self {
            Source::Local(f, _) => return crate::ops::readers::core::read_at_most(f, dst, offset),
            Source::Remote { uri, opts, .. } => {
                if n > 0 {
                    fetch_ranges(&[(uri.as_str(), offset..offset + n as u64)], opts, |_, b| dst[..n].copy_from_slice(&b)).map_err(|(_, m)| m)?;
                }
            }
            Source::Fetched(b) => dst[..n].copy_from_slice(&b[offset as usize..offset as usize + n]),
        }
        Ok(n)
    }

    /// Reads exactly `dst.len()` bytes at `offset` (`what` names them in the error).
    pub fn read_exact_at(&self, dst: &mut [u8], offset: u64, what: &str) -> Result<(), String> {
        let got = self.read_at_most(dst, offset)?;
        if got < dst.len() {
            return Err(format!("truncated file: {got} of {what}'s {} bytes could be read", dst.len()));
        }
        Ok(())
    }
}

/// Ranges of one object closer than this are read with one request (the bytes between are
/// read and dropped: cheaper than a round trip).
const MERGE_GAP: u64 = 64 << 10;

/// Largest request made by merging ranges.
const MAX_MERGED: u64 = 16 << 20;

/// Groups `ranges` into requests: (object, covering range, indices of the ranges it serves),
/// merging ranges of one object that lie less than `gap` bytes apart.
fn coalesce<'a>(ranges: &[(&'a str, Range<u64>)], gap: u64) -> Vec<(&'a str, Range<u64>, Vec<usize>)> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by(|&a, &b| (ranges[a].0, ranges[a].1.start).cmp(&(ranges[b].0, ranges[b].1.start)));
    let mut out: Vec<(&str, Range<u64>, Vec<usize>)> = Vec::new();
    for j in order {
        let (uri, r) = (ranges[j].0, ranges[j].1.clone());
        if let Some(last) = out.last_mut() {
            if last.0 == uri && r.start <= last.1.end + gap && r.end.max(last.1.end) - last.1.start <= MAX_MERGED {
                last.1.end = last.1.end.max(r.end);
                last.2.push(j);
                continue;
            }
        }
        out.push((uri, r, vec![j]));
    }
    out
}

/// Reads every job `(source, offset, destination)`: the ranges of objects all requested at
/// once (up to [`max_in_flight`]), the files (and objects fetched already) on up to `threads`
/// threads. The error of a
/// failed job `i` is `failed(i, message)`.
pub fn read_many(
    jobs: &mut [(&Source, u64, &mut [u8])],
    threads: usize,
    failed: impl Fn(usize, String) -> crate::error::Error + Sync,
) -> crate::error::Result<()> {
    let mut remote: Vec<(usize, &str, Range<u64>)> = Vec::new();
    let mut opts = Options::default();
    let mut local: Vec<(usize, &Source, u64, &mut [u8])> = Vec::new();
    let mut remote_dst: Vec<&mut [u8]> = Vec::new();
    for (i, (src, offset, dst)) in jobs.iter_mut().enumerate() {
        match src {
            Source::Remote { uri, opts: o, .. } => {
                opts = o.clone();
                remote.push((i, uri.as_str(), *offset..*offset + dst.len() as u64));
                remote_dst.push(dst);
            }
            Source::Local(..) | Source::Fetched(_) => local.push((i, *src, *offset, dst)),
        }
    }
    if !remote.is_empty() {
        // One request per run of nearby ranges of an object (a WebDataset sample's members, a
        // shard's records read in order): latency is paid per request, not per byte.
        let wanted: Vec<(&str, Range<u64>)> = remote.iter().map(|(_, u, r)| (*u, r.clone())).collect();
        let requests = coalesce(&wanted, MERGE_GAP);
        let ranges: Vec<(&str, Range<u64>)> = requests.iter().map(|(u, r, _)| (*u, r.clone())).collect();
        fetch_ranges(&ranges, &opts, |q, b| {
            let start = requests[q].1.start;
            for &j in &requests[q].2 {
                let r = &wanted[j].1;
                remote_dst[j].copy_from_slice(&b[(r.start - start) as usize..(r.end - start) as usize]);
            }
        })
        .map_err(|(q, m)| failed(remote[requests[q].2[0]].0, m))?;
    }
    let total = local.iter().map(|j| j.3.len()).sum();
    crate::ops::readers::core::read_in_parallel(&mut local, threads, total, |j| j.3.len(), |(i, src, offset, dst)| {
        src.read_exact_at(dst, *offset, "the record").map_err(|m| failed(*i, m))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearby_ranges_of_an_object_share_a_request() {
        let r = [("s3://b/x", 1000..1004), ("s3://b/y", 0..10), ("s3://b/x", 0..512), ("s3://b/x", 10_000_000..10_000_010), ("s3://b/x", 600..700)];
        let q = coalesce(&r, 64 << 10);
        assert_eq!(q, vec![("s3://b/x", 0..1004, vec![2, 4, 0]), ("s3://b/x", 10_000_000..10_000_010, vec![3]), ("s3://b/y", 0..10, vec![1])]);
        // Overlapping ranges (padding repeats a sample) are served by one request too.
        assert_eq!(coalesce(&[("s3://b/x", 0..8), ("s3://b/x", 0..8)], 0), vec![("s3://b/x", 0..8, vec![0, 1])]);
    }

    #[test]
    fn uris_and_joins() {
        assert!(is_object_uri("s3://bucket/a") && is_object_uri("gs://b/x") && is_object_uri("https://h/p"));
        assert!(!is_object_uri("/data/train") && !is_object_uri("file:///data") && !is_object_uri("rel/a://b"));
        assert_eq!(local_path("file:///data/x"), "/data/x");
        assert!(store_for("ftp://h/x", &Options::default()).unwrap_err().contains("unsupported storage scheme"));
    }

    #[test]
    fn queries_of_urls_are_left_out_of_messages() {
        let said = "error sending request for url (https://acct.blob.core.windows.net/c/x?sv=2022&sig=SECRET): timed out; is this? fine";
        assert_eq!(without_queries(said), "error sending request for url (https://acct.blob.core.windows.net/c/x?...): timed out; is this? fine");
    }
}
