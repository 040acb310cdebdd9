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
    // To HEAD too: hyper sends the head only, with the body's length.
    let reply = |code: StatusCode, kind: &'static str, text: String| {
        let mut r = Response::new(Full::new(Bytes::from(text)));
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

#[cfg(test)]
mod tests {
    use crate::status::{Format, Live, Snapshot};
    use std::io::{Read, Write};
    use std::time::Duration;

    /// `METHOD PATH` over a new connection: the whole answer (the server closes it).
    fn ask(addr: std::net::SocketAddr, method: &str, path: &str) -> String {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            c,
            "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        c.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn the_server_answers_status_and_metrics_and_refuses_the_rest() {
        let render = Box::new(|s: &Snapshot, f: Format| match f {
            Format::Json => format!("{{\"phase\":\"{}\"}}", s.phase),
            Format::Prometheus => "mfu_rs_ranks{tool=\"cp\"} 1\n".to_string(),
        });
        let live = Live::new("cp", Duration::from_secs(60), None, render);
        let addr = live.start(1, Some("127.0.0.1:0")).unwrap().unwrap();
        for path in ["/status", "/status.json"] {
            let a = ask(addr, "GET", path);
            assert!(a.starts_with("HTTP/1.1 200 OK\r\n"), "{a}");
            assert!(a.contains("content-type: application/json"), "{a}");
            assert!(a.ends_with("{\"phase\":\"starting\"}"), "{a}");
        }
        let a = ask(addr, "GET", "/metrics");
        assert!(a.contains("text/plain; version=0.0.4"), "{a}");
        assert!(a.ends_with("mfu_rs_ranks{tool=\"cp\"} 1\n"), "{a}");
        let head = ask(addr, "HEAD", "/metrics");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains("content-length: 26\r\n"), "{head}");
        assert!(head.ends_with("\r\n\r\n"), "no body after the head: {head}");
        assert!(ask(addr, "GET", "/nothing").starts_with("HTTP/1.1 404 "));
        let post = ask(addr, "POST", "/status");
        assert!(
            post.starts_with("HTTP/1.1 405 ") && post.contains("allow: GET, HEAD"),
            "{post}"
        );
        live.finish(crate::status::State::Done, 0, 0, 0).unwrap();
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "still listening after the end"
        );
    }
}
