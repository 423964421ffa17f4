//! A listening socket that can be closed while the server drains: once closed, new
//! connections are refused at once (rather than left waiting in the backlog of a socket
//! nobody accepts from), while the connections already accepted are served to the end.

use std::time::Duration;

use salvo::conn::tcp::TcpAcceptor;
use salvo::conn::{Accepted, Acceptor, Holding};
use salvo::fuse::ArcFusePolicy;
use tokio::sync::{oneshot, watch};

/// Wraps the server's TCP acceptor; see [`Closer`].
pub struct ClosingAcceptor {
    inner: Option<TcpAcceptor>,
    holdings: Vec<Holding>,
    close: watch::Receiver<bool>,
    closed: Option<oneshot::Sender<()>>,
}

/// Closes the listening socket of its [`ClosingAcceptor`].
pub struct Closer {
    close: watch::Sender<bool>,
    closed: tokio::sync::Mutex<Option<oneshot::Receiver<()>>>,
}

/// An acceptor whose socket [`Closer::close`] closes.
pub fn closing(inner: TcpAcceptor) -> (ClosingAcceptor, Closer) {
    let (close_tx, close_rx) = watch::channel(false);
    let (closed_tx, closed_rx) = oneshot::channel();
    let holdings = inner.holdings().to_vec();
    let acceptor = ClosingAcceptor { inner: Some(inner), holdings, close: close_rx, closed: Some(closed_tx) };
    (acceptor, Closer { close: close_tx, closed: tokio::sync::Mutex::new(Some(closed_rx)) })
}

impl Closer {
    /// Closes the socket and waits (at most `within`) until it is closed; answers whether it
    /// was. The server must still be accepting for the socket to close.
    pub async fn close(&self, within: Duration) -> bool {
        self.close.send_replace(true);
        let Some(closed) = self.closed.lock().await.take() else { return true };
        matches!(tokio::time::timeout(within, closed).await, Ok(Ok(())))
    }
}

impl Acceptor for ClosingAcceptor {
    type Coupler = <TcpAcceptor as Acceptor>::Coupler;
    type Stream = <TcpAcceptor as Acceptor>::Stream;

    fn holdings(&self) -> &[Holding] {
        &self.holdings
    }

    async fn accept(
        &mut self,
        fuse_policy: Option<ArcFusePolicy>,
    ) -> std::io::Result<Accepted<Self::Coupler, Self::Stream>> {
        if let Some(inner) = self.inner.as_mut() {
            let mut close = self.close.clone();
            tokio::select! {
                accepted = inner.accept(fuse_policy) => return accepted,
                _ = close.wait_for(|close| *close) => {}
            }
            // Dropping the acceptor closes the socket: connecting is refused from here on.
            self.inner = None;
            if let Some(closed) = self.closed.take() {
                let _ = closed.send(());
            }
        }
        // Nothing more to accept; the server stops asking once it stops.
        std::future::pending().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use salvo::prelude::*;

    #[handler]
    async fn hello() -> &'static str {
        "hello"
    }

    #[tokio::test]
    async fn a_closed_socket_refuses_connections_and_the_server_stops() {
        let acceptor = TcpListener::new("127.0.0.1:0").bind().await;
        let addr = acceptor.local_addr().unwrap();
        let (acceptor, closer) = closing(acceptor);
        let server = Server::new(acceptor);
        let handle = server.handle();
        let task = tokio::spawn(server.serve(Router::new().get(hello)));
        assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
        assert!(closer.close(Duration::from_secs(5)).await, "the socket closes");
        let refused = tokio::net::TcpStream::connect(addr).await;
        assert_eq!(refused.unwrap_err().kind(), std::io::ErrorKind::ConnectionRefused);
        handle.stop_graceful(Some(Duration::from_secs(5)));
        tokio::time::timeout(Duration::from_secs(5), task).await.expect("the server stops").unwrap();
    }
}
