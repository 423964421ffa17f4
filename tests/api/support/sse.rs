//! Reading a Server-Sent Events stream the way a screen does: one named event at a time.
//! A stream never ends by itself, so it cannot be read whole by [`super::reply`]: [`open`]
//! is the way a test sends a request for one.

use serde_json::Value;

use super::{Reply, reply_of};

/// What a request for a stream got: the stream, or an answer that is not one.
pub enum Opened {
    Stream(EventStream),
    Refused(Reply),
}

impl Opened {
    /// The stream (a 200 of `text/event-stream`); fails showing the answer otherwise.
    #[track_caller]
    pub fn stream(self) -> EventStream {
        match self {
            Self::Stream(stream) => stream,
            Self::Refused(r) => panic!("no event stream: {} {}", r.status, r.text),
        }
    }

    /// The answer that refused the stream; fails when a stream opened.
    #[track_caller]
    pub fn refused(self) -> Reply {
        match self {
            Self::Stream(stream) => panic!("a stream opened ({:?})", stream.headers),
            Self::Refused(r) => r,
        }
    }
}

/// Sends a request for an event stream: a 200 of `text/event-stream` is kept open to be read
/// event by event; any other answer is read whole.
pub async fn open(req: reqwest::RequestBuilder) -> Opened {
    let response = req.send().await.expect("request sent");
    let is_stream = response.status() == reqwest::StatusCode::OK
        && response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
    if is_stream {
        Opened::Stream(EventStream::new(response))
    } else {
        Opened::Refused(reply_of(response).await.expect("answer read"))
    }
}

pub struct EventStream {
    /// The headers the stream was answered with.
    pub headers: reqwest::header::HeaderMap,
    response: reqwest::Response,
    buffer: String,
    /// Everything the stream sent so far, comments included.
    pub raw: String,
}

impl EventStream {
    fn new(response: reqwest::Response) -> Self {
        Self { headers: response.headers().clone(), response, buffer: String::new(), raw: String::new() }
    }

    /// The next named event: `(name, data)` with the data parsed as JSON (`Null` when it is
    /// not), or `None` when the stream closed.
    pub async fn next_any(&mut self) -> Option<(String, Value)> {
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let name = block.lines().find_map(|l| l.strip_prefix("event:")).map(|n| n.trim().to_owned());
                let data: String =
                    block.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
                if let Some(name) = name {
                    return Some((name, serde_json::from_str(&data).unwrap_or(Value::Null)));
                }
            }
            let chunk = self.response.chunk().await.expect("the stream reads")?;
            let text = String::from_utf8_lossy(&chunk);
            self.raw.push_str(&text);
            self.buffer.push_str(&text);
        }
    }

    /// The data of the next event named `name`, passing over others.
    pub async fn next_named(&mut self, name: &str) -> Value {
        loop {
            let (got, data) = self.next_any().await.expect("the stream stays open");
            if got == name {
                return data;
            }
        }
    }
}
