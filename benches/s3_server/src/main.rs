//! `bench-s3-server ROOT MILLISECONDS ACCESS_KEY SECRET_KEY`: an S3 server (s3s-fs) over the
//! folder ROOT (each sub-folder a bucket), on 127.0.0.1 at a port the OS picks, that waits
//! MILLISECONDS before answering each request, however many are in flight: a distant bucket as
//! a reader sees it. Requests are signed and checked (SigV4) as by S3. Prints "READY <port>".

use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: bench-s3-server ROOT MILLISECONDS ACCESS_KEY SECRET_KEY");
        std::process::exit(2);
    }
    let delay = Duration::from_micros((args[2].parse::<f64>()? * 1000.0) as u64);
    let mut builder = S3ServiceBuilder::new(s3s_fs::FileSystem::new(&args[1]).map_err(|e| format!("cannot serve {}: {e:?}", args[1]))?);
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
