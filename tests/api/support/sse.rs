//! Reading a Server-Sent Events stream the way a screen does: one named event at a time.

use serde_json::Value;

pub struct EventStream {
    response: reqwest::Response,
    buffer: String,
    /// Everything the stream sent so far, comments included.
    pub raw: String,
}

impl EventStream {
    pub fn new(response: reqwest::Response) -> Self {
        Self { response, buffer: String::new(), raw: String::new() }
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
