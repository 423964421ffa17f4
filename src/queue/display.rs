//! The waiting-room screen, beside the API: `GET /display/{id}` serves one self-contained
//! page (inline style and script, nothing from elsewhere, a Content-Security-Policy that
//! allows nothing else), and `GET /display/{id}/events` streams the service's board to it.
//!
//! The screen authenticates with a display key (`display_keys`), sent by the page's script in
//! the `X-Display-Key` header of a streamed `fetch`: the key lives in the page address's
//! fragment (`/display/5#key=dk_...`), which browsers never send, and never travels in a
//! URL, so neither our telemetry (a route template and a path) nor a proxy's access log
//! (which keeps query strings) sees it. The stream is the queue's (`events::Display`), ended
//! on every instance when the key is revoked; what it sends is the `board`, never a record.

use std::sync::LazyLock;

use base64::Engine;
use salvo::http::HeaderValue;
use salvo::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS};
use salvo::prelude::*;
use salvo::sse::SseEvent;
use sha2::{Digest, Sha256};

use super::board::Board;
use super::display_keys::granted;
use super::events::{Change, Display, Holder, serve};
use super::tickets::service_of;
use crate::http::error::{ApiError, ApiResult};
use crate::http::{self as web};
use crate::state::AppState;

/// The header a screen sends its key in.
pub const KEY_HEADER: &str = "x-display-key";

const PAGE: &str = include_str!("display.html");

/// The page's policy: its own inline style and script (by hash), the stream from this
/// origin, and nothing else: no other script, style, font, image, frame or form target.
static POLICY: LazyLock<String> = LazyLock::new(|| {
    let digest = |tag: &str| {
        let body = inline(PAGE, tag);
        format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(Sha256::digest(body)))
    };
    format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; base-uri 'none'; \
         form-action 'none'; frame-ancestors 'none'",
        digest("script"),
        digest("style"),
    )
});

/// The text of the page's one `<tag>` element.
fn inline<'a>(html: &'a str, tag: &str) -> &'a str {
    let open = format!("<{tag}>");
    let start = html.find(&open).map(|at| at + open.len()).expect("the page has its inline element");
    let end = html[start..].find(&format!("</{tag}>")).expect("the inline element is closed");
    &html[start..start + end]
}

/// `GET /display/{id}`: the same page for every service (it holds nothing until its key
/// opens the stream), so it tells no one which services exist.
#[handler]
pub async fn page(req: &mut Request, res: &mut Response) -> ApiResult<()> {
    web::path_id(req, "id")?;
    let headers = res.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_str(&POLICY).expect("a header value"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res.render(Text::Html(PAGE));
    Ok(())
}

/// `GET /display/{id}/events` with `X-Display-Key`: the board (`board`) now and after every
/// change of the service's tickets, `end` when the key is revoked or the instance stops.
/// A key that is missing, malformed, unknown or revoked is a 401 (counted against the
/// caller's address like a made-up token); a key of another service is a 403.
#[handler]
pub async fn follow(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let state = AppState::of(depot);
    let service_id = web::path_id(req, "id")?;
    let presented = req.headers().get(KEY_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default().trim();
    let address = state.bad_token_key(req);
    state.limits.bad_token.check(&address)?;
    let Some(key) = granted(&state, presented).await? else {
        state.limits.bad_token.count(&address)?;
        return Err(ApiError::Unauthenticated);
    };
    if key.service_id != service_id {
        return Err(ApiError::Forbidden {
            code: "display_forbidden",
            message: "This display key shows another service.".into(),
        });
    }
    crate::telemetry::record_branch(key.branch_id);
    let route = state.directory.route(key.branch_id).await?.map_err(|_| ApiError::NotFound)?;
    let service = service_of(&state, route.id, service_id).await?.ok_or(ApiError::NotFound)?;
    let display = Display::open(state, Holder::Key { id: key.key_id }, route.clone(), service);
    let mut board = Board::new(&display.snapshot().await?, &route.timezone);
    let shown =
        |board: &Board, called| SseEvent::default().name("board").text(board.render(called).to_string());
    let first = shown(&board, None);
    serve(
        display,
        first,
        move |change| match change {
            Change::Snapshot(view) => {
                board.reset(&view);
                Some(shown(&board, None))
            }
            Change::Ticket(ticket) => board.apply(&ticket).map(|called| shown(&board, called)),
        },
        res,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_the_pages_own_script_and_style() {
        assert!(inline(PAGE, "script").contains("X-Display-Key"));
        assert!(inline(PAGE, "style").contains("font-size"));
        assert_eq!(PAGE.matches("<script").count(), 1, "one inline script, nothing loaded");
        assert_eq!(PAGE.matches("<style").count(), 1);
        assert!(!PAGE.contains("src=") && !PAGE.contains("href="), "the page loads nothing");
        assert!(POLICY.starts_with("default-src 'none'; script-src 'sha256-"), "{}", *POLICY);
    }
}
