//! The HTTP/1 server of a [`Live`] status (hyper, on the progress runtime): `GET /status` (or
//! `/status.json`) answers the status as JSON, `GET /metrics` in Prometheus's text format, `/`
//! names both; anything else is 404, a method other than GET or HEAD 405.

use crate::status::{Format, Live};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{header, Method, Request, Response, StatusCode};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// A client that sends no whole request head within this time is dropped.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Accept connections on `listener` and answer each on a task of its own, until aborted.
pub(crate) async fn serve(listener: tokio::net::TcpListener, live: Arc<Live>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors or a connection reset before it was accepted: try again
            // shortly rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let live = Arc::clone(&live);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let answer = respond(&live, &req);
                async move { Ok::<_, Infallible>(answer) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The answer to `req`.
fn respond<B>(live: &Live, req: &Request<B>) -> Response<Full<Bytes>> {
    let reply = |code: StatusCode, kind: &'static str, text: String| {
        let body = if req.method() == Method::HEAD {
            Bytes::new()
        } else {
            Bytes::from(text)
        };
        let mut r = Response::new(Full::new(body));
        *r.status_mut() = code;
        r.headers_mut()
            .insert(header::CONTENT_TYPE, header::HeaderValue::from_static(kind));
        r.headers_mut().insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-store"),
        );
        r
    };
    const TEXT: &str = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "only GET and HEAD\n".into(),
        );
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match req.uri().path() {
        "/status" | "/status.json" => reply(
            StatusCode::OK,
            "application/json",
            live.render(Format::Json),
        ),
        "/metrics" => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            live.render(Format::Prometheus),
        ),
        "/" => reply(
            StatusCode::OK,
            TEXT,
            "mfu-rs live status: /status (JSON), /metrics (Prometheus)\n".into(),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            TEXT,
            "not found: try /status or /metrics\n".into(),
        ),
    }
}
