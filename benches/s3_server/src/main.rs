//! `bench-s3-server ROOT MILLISECONDS ACCESS_KEY SECRET_KEY`: an S3 server over the folder ROOT
//! (each sub-folder a bucket), on 127.0.0.1 at a port the OS picks, that waits MILLISECONDS
//! before answering each request, however many are in flight: a distant bucket as a reader
//! sees it. Requests are signed and checked (SigV4) as by S3. Prints "READY <port>".
//!
//! The protocol is the s3s crate's. Object reads (GET, ranged GET, HEAD) are served here, one
//! blocking read each, with an ETag made of the file's size and modification time; everything
//! else (listings, buckets, PUT) is s3s-fs's. s3s-fs's own reads stream files through tokio's
//! file I/O in 4 KiB chunks and hash every file it did not receive by PUT on every GET: ~1 ms
//! of CPU per request, which made the server, not the reader, what the bench measured.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::dto::*;
use s3s::service::S3ServiceBuilder;
use s3s::{s3_error, S3Request, S3Response, S3Result, S3};
use tokio::net::TcpListener;

/// s3s-fs, with object reads of its own.
struct Folder {
    fs: s3s_fs::FileSystem,
    root: PathBuf,
}

/// What a read found: the bytes asked for, the file's size, its modification time.
struct Found {
    data: Vec<u8>,
    len: u64,
    modified: std::time::SystemTime,
}

impl Folder {
    fn path(&self, bucket: &str, key: &str) -> S3Result<PathBuf> {
        let rel = Path::new(key);
        if bucket.contains('/') || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(s3_error!(InvalidArgument, "bad bucket or key"));
        }
        Ok(self.root.join(bucket).join(rel))
    }

    /// Reads `range` of the object (`None`: all of it; `Some(None)`: none, for HEAD).
    async fn read(&self, bucket: &str, key: &str, range: Option<Option<Range>>) -> S3Result<(Found, Option<std::ops::Range<u64>>)> {
        let path = self.path(bucket, key)?;
        tokio::task::spawn_blocking(move || {
            let mut f = std::fs::File::open(&path).map_err(|_| s3_error!(NoSuchKey))?;
            let meta = f.metadata().map_err(|_| s3_error!(NoSuchKey))?;
            if !meta.is_file() {
                return Err(s3_error!(NoSuchKey));
            }
            let len = meta.len();
            let wanted = match &range {
                Some(None) => Some(0..0),
                Some(Some(r)) => Some(r.check(len)?),
                None => None,
            };
            let (start, end) = wanted.as_ref().map_or((0, len), |r| (r.start, r.end));
            let mut data = vec![0u8; (end - start) as usize];
            f.seek(SeekFrom::Start(start)).and_then(|_| f.read_exact(&mut data)).map_err(|e| s3_error!(InternalError, "{e}"))?;
            let modified = meta.modified().unwrap_or(UNIX_EPOCH);
            Ok((Found { data, len, modified }, wanted.filter(|_| matches!(range, Some(Some(_))))))
        })
        .await
        .map_err(|e| s3_error!(InternalError, "{e}"))?
    }
}

fn etag(found: &Found) -> ETag {
    let nanos = found.modified.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
    ETag::Strong(format!("{:x}-{nanos:x}", found.len))
}

#[async_trait::async_trait]
impl S3 for Folder {
    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        let input = req.input;
        let (found, range) = self.read(&input.bucket, &input.key, input.range.map(Some)).await?;
        let output = GetObjectOutput {
            content_length: Some(found.data.len() as i64),
            content_range: range.map(|r| format!("bytes {}-{}/{}", r.start, r.end.saturating_sub(1), found.len)),
            last_modified: Some(Timestamp::from(found.modified)),
            e_tag: Some(etag(&found)),
            body: Some(StreamingBlob::from(s3s::Body::from(found.data))),
            ..Default::default()
        };
        Ok(S3Response::new(output))
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        let input = req.input;
        let (found, _) = self.read(&input.bucket, &input.key, Some(None)).await?;
        let output = HeadObjectOutput {
            content_length: Some(found.len as i64),
            last_modified: Some(Timestamp::from(found.modified)),
            e_tag: Some(etag(&found)),
            ..Default::default()
        };
        Ok(S3Response::new(output))
    }

    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.fs.list_objects_v2(req).await
    }

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        self.fs.list_objects(req).await
    }

    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        self.fs.list_buckets(req).await
    }

    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        self.fs.head_bucket(req).await
    }

    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        self.fs.create_bucket(req).await
    }

    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        self.fs.put_object(req).await
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: bench-s3-server ROOT MILLISECONDS ACCESS_KEY SECRET_KEY");
        std::process::exit(2);
    }
    let delay = Duration::from_micros((args[2].parse::<f64>()? * 1000.0) as u64);
    let fs = s3s_fs::FileSystem::new(&args[1]).map_err(|e| format!("cannot serve {}: {e:?}", args[1]))?;
    let root = std::fs::canonicalize(&args[1])?;
    let mut builder = S3ServiceBuilder::new(Folder { fs, root });
    builder.set_auth(SimpleAuth::from_single(args[3].clone(), args[4].clone()));
    let service = builder.build();
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    println!("READY {}", listener.local_addr()?.port());
    let http = ConnBuilder::new(TokioExecutor::new());
    loop {
        let (socket, _) = listener.accept().await?;
        socket.set_nodelay(true)?;
        let service = service.clone();
        let delayed = hyper::service::service_fn(move |req| {
            let service = service.clone();
            async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                hyper::service::Service::call(&service, req).await
            }
        });
        let conn = http.serve_connection(TokioIo::new(socket), delayed).into_owned();
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
}
