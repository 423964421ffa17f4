//! Password reset by code (file mail drop and real SMTP) and password change.

use super::*;
use crate::support::assert_status;

// ---------------------------------------------------------------------------------------
// Password reset by code (file mail drop)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn reset_code_answers_alike_for_known_and_unknown_emails_and_validates_the_email() {
    let (app, mut inbox) = MailDrop::spawn(relax).await;
    app.create_user("rita", &["nurse"], &[]).await;
    let known = post_public(&app, RESET_CODE, json!({ "email": "rita@example.test" })).await;
    assert_status(&known, 200);
    assert!(known.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", known.text);
    let unknown = post_public(&app, RESET_CODE, json!({ "email": "nobody@example.test" })).await;
    assert_status(&unknown, 200);
    assert_eq!(unknown.body, known.body, "known and unknown addresses must be indistinguishable");

    assert_invalid(&post_public(&app, RESET_CODE, json!({ "email": "not-an-email" })).await, &["email"]);
    assert_invalid(&post_public(&app, RESET_CODE, json!({})).await, &["email"]);
    let r = post_public(&app, VERIFY_CODE, json!({ "email": "not-an-email", "code": "123456" })).await;
    assert_invalid(&r, &["email"]);
    let r = post_public(
        &app,
        RESET_PASSWORD,
        json!({
            "email": "not-an-email",
            "code": "123456",
            "password": "long-enough-1",
            "password_confirmation": "long-enough-1",
        }),
    )
    .await;
    assert_invalid(&r, &["email"]);

    let (mail, code) = inbox.next_reset_mail().await;
    assert!(mail.contains("rita@example.test"), "mail not addressed to the user: {mail}");
    assert_eq!(code.len(), 6);
    // Only the known address gets a mail: the next one to arrive is the one asked for last.
    let r = post_public(&app, RESET_CODE, json!({ "email": "rita@example.test" })).await;
    assert_status(&r, 200);
    let (mail, _) = inbox.next_reset_mail().await;
    assert!(mail.contains("rita@example.test"), "a mail for an unknown address: {mail}");
    assert_eq!(inbox.count(), 2, "only the known address gets a mail");
}

#[tokio::test]
async fn reset_codes_are_stored_hashed_and_live_15_minutes() {
    let (app, mut inbox) = MailDrop::spawn(relax).await;
    let (id, _) = app.create_user("hana", &["nurse"], &[]).await;
    let r = post_public(&app, RESET_CODE, json!({ "email": "hana@example.test" })).await;
    assert_status(&r, 200);
    let (_, code) = inbox.next_reset_mail().await;
    let client = app.state.registry.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT encode(code_hash, 'hex'), encode(code_hash, 'escape'),
                    EXTRACT(EPOCH FROM expires_at - now())::float8
               FROM password_reset_codes WHERE user_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let hex: String = row.get(0);
    let raw: String = row.get(1);
    let lifetime: f64 = row.get(2);
    assert_ne!(raw, code, "the code is stored as typed");
    assert!(!raw.contains(&code) && !hex.contains(&code), "the code is stored as typed");
    assert!((14.0 * 60.0..=15.0 * 60.0 + 5.0).contains(&lifetime), "code lifetime {lifetime} s");
    // Past its lifetime the right code no longer works.
    client
        .execute(
            "UPDATE password_reset_codes SET expires_at = now() - interval '1 second' WHERE user_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let r = post_public(&app, VERIFY_CODE, json!({ "email": "hana@example.test", "code": code })).await;
    assert_invalid(&r, &["code"]);
}

#[tokio::test]
async fn password_reset_full_flow() {
    let (app, mut inbox) = MailDrop::spawn(relax).await;
    let (_, before1) = app.create_user("rosa", &["nurse"], &[]).await;
    let before2 = app.login("rosa", USER_PASSWORD).await;
    let email = "rosa@example.test";

    let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
    assert_status(&r, 200);
    let (_, code) = inbox.next_reset_mail().await;

    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": wrong_code(&code) })).await;
    assert_invalid(&r, &["code"]);
    let r = post_public(&app, VERIFY_CODE, json!({ "email": "someone@example.test", "code": code })).await;
    assert_invalid(&r, &["code"]);
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": code })).await;
    assert_status(&r, 200);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);
    // Verifying does not use the code up.
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": code })).await;
    assert_status(&r, 200);

    let new_password = "brand-new-password-7";
    let reset = |code: &str, password: &str, confirmation: &str| json!({ "email": email, "code": code, "password": password, "password_confirmation": confirmation });
    let r = post_public(&app, RESET_PASSWORD, reset(&code, new_password, "something-else-1")).await;
    assert_invalid(&r, &["password"]);
    let r = post_public(&app, RESET_PASSWORD, reset(&code, "short", "short")).await;
    assert_invalid(&r, &["password"]);
    // Refusals changed nothing: the old password and tokens still work.
    assert_status(&app.profile_as(&before1).await, 200);
    assert_status(&app.login_reply("rosa", USER_PASSWORD).await, 200);

    let r = post_public(&app, RESET_PASSWORD, reset(&code, new_password, new_password)).await;
    assert_status(&r, 200);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);

    let r = app.login_reply("rosa", USER_PASSWORD).await;
    assert_status(&r, 401); // the old password no longer logs in
    assert_eq!(r.body, json!({ "message": "Invalid credentials" }));
    let r = app.login_reply("rosa", new_password).await;
    assert_status(&r, 200); // the new password logs in
    let after = r.body["data"]["token"].as_str().unwrap().to_owned();
    for token in [&before1, &before2] {
        let r = reply(app.request_as(token, Method::GET, PROFILE, None)).await;
        assert_error(&r, 401, "unauthenticated");
    }
    assert_status(&app.profile_as(&after).await, 200);
    assert_status(&app.profile_as(&app.admin_token).await, 200); // other users keep their sessions

    // Single use.
    let r = post_public(&app, RESET_PASSWORD, reset(&code, "third-password-3", "third-password-3")).await;
    assert_invalid(&r, &["code"]);
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": code })).await;
    assert_invalid(&r, &["code"]);
    assert_status(&app.login_reply("rosa", new_password).await, 200);
}

#[tokio::test]
async fn a_new_reset_code_replaces_the_old_one() {
    let (app, mut inbox) = MailDrop::spawn(relax).await;
    app.create_user("nora", &["nurse"], &[]).await;
    let email = "nora@example.test";
    let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
    assert_status(&r, 200);
    let (_, old) = inbox.next_reset_mail().await;
    let new = loop {
        let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
        assert_status(&r, 200);
        let (_, code) = inbox.next_reset_mail().await;
        if code != old {
            break code;
        }
    };
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": old })).await;
    assert_invalid(&r, &["code"]);
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": new })).await;
    assert_status(&r, 200);
    let password = "replaced-password-5";
    let r = post_public(
        &app,
        RESET_PASSWORD,
        json!({ "email": email, "code": old, "password": password, "password_confirmation": password }),
    )
    .await;
    assert_invalid(&r, &["code"]);
    let r = post_public(
        &app,
        RESET_PASSWORD,
        json!({ "email": email, "code": new, "password": password, "password_confirmation": password }),
    )
    .await;
    assert_status(&r, 200);
    assert_status(&app.login_reply("nora", password).await, 200);
}

#[tokio::test]
async fn five_wrong_tries_burn_the_code() {
    let (app, mut inbox) = MailDrop::spawn(relax).await;
    app.create_user("bruno", &["nurse"], &[]).await;
    let email = "bruno@example.test";

    // Four wrong tries leave the code usable.
    let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
    assert_status(&r, 200);
    let (_, code) = inbox.next_reset_mail().await;
    for _ in 1..=4 {
        let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": wrong_code(&code) })).await;
        assert_status(&r, 422);
    }
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": code })).await;
    assert_status(&r, 200); // after four wrong tries

    // A fresh code, five wrong tries: burnt.
    let code = loop {
        let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
        assert_status(&r, 200);
        let (_, fresh) = inbox.next_reset_mail().await;
        if fresh != code {
            break fresh;
        }
    };
    for _ in 1..=5 {
        let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": wrong_code(&code) })).await;
        assert_invalid(&r, &["code"]);
        assert_status(&r, 422);
    }
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": code })).await;
    assert_invalid(&r, &["code"]);
    let password = "burnt-code-password";
    let r = post_public(
        &app,
        RESET_PASSWORD,
        json!({ "email": email, "code": code, "password": password, "password_confirmation": password }),
    )
    .await;
    assert_invalid(&r, &["code"]);
    assert_status(&app.login_reply("bruno", USER_PASSWORD).await, 200); // the password is unchanged
    assert_status(&app.login_reply("bruno", password).await, 401);
}

// ---------------------------------------------------------------------------------------
// Password reset through a real SMTP server
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn password_reset_through_an_smtp_server() {
    let (app, smtp) = spawn_with_smtp(relax).await;
    let (_, before) = app.create_user("sofia", &["nurse"], &[]).await;
    let email = "sofia@example.test";
    let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
    assert_status(&r, 200);
    let mail = smtp.wait_for(1).await.remove(0);
    assert_eq!(mail.recipients, vec![email.to_owned()], "recipient");
    assert!(mail.sender.contains('@'), "envelope sender {:?}", mail.sender);
    assert!(mail.text.contains("Subject:"), "{}", mail.text);
    let code = reset_code_in(&mail.text).unwrap_or_else(|| panic!("no code in the message: {}", mail.text));

    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": code })).await;
    assert_status(&r, 200);
    let password = "smtp-reset-password-2";
    let r = post_public(
        &app,
        RESET_PASSWORD,
        json!({ "email": email, "code": code, "password": password, "password_confirmation": password }),
    )
    .await;
    assert_status(&r, 200);
    assert_status(&app.login_reply("sofia", password).await, 200);
    assert_status(&app.login_reply("sofia", USER_PASSWORD).await, 401);
    let r = reply(app.request_as(&before, Method::GET, PROFILE, None)).await;
    assert_error(&r, 401, "unauthenticated");
    // An unknown address sends nothing: the next mail to arrive is the one asked for after it.
    let r = post_public(&app, RESET_CODE, json!({ "email": "ghost@example.test" })).await;
    assert_status(&r, 200);
    let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
    assert_status(&r, 200);
    let mails = smtp.wait_for(2).await;
    assert_eq!(mails.len(), 2, "a message was sent for an unknown address: {mails:?}");
    assert_eq!(mails[1].recipients, vec![email.to_owned()], "a message was sent for an unknown address");
}

// ---------------------------------------------------------------------------------------
// Change password
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn change_password_validates_and_ends_other_sessions_only() {
    let app = spawn_relaxed().await;
    let (_, current) = app.create_user("carl", &["nurse"], &[]).await;
    let other = app.login("carl", USER_PASSWORD).await;
    let new_password = "changed-password-4";
    let change = |current_password: &str, password: &str, confirmation: &str| {
        app.request_as(&current, Method::POST, CHANGE_PASSWORD, None).json(&json!({
            "current_password": current_password,
            "password": password,
            "password_confirmation": confirmation,
        }))
    };
    assert_invalid(
        &reply(change("not-my-password", new_password, new_password)).await,
        &["current_password"],
    );
    assert_invalid(&reply(change(USER_PASSWORD, new_password, "different-password")).await, &["password"]);
    assert_invalid(&reply(change(USER_PASSWORD, "short", "short")).await, &["password"]);
    assert_status(&app.profile_as(&other).await, 200); // refusals end no session
    assert_status(&app.login_reply("carl", USER_PASSWORD).await, 200); // refusals change nothing

    let r = reply(change(USER_PASSWORD, new_password, new_password)).await;
    assert_status(&r, 200);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);
    assert_status(&app.profile_as(&current).await, 200); // the current token goes on
    let r = reply(app.request_as(&other, Method::GET, PROFILE, None)).await;
    assert_error(&r, 401, "unauthenticated");
    assert_status(&app.login_reply("carl", new_password).await, 200);
    let r = app.login_reply("carl", USER_PASSWORD).await;
    assert_status(&r, 401);
    assert_status(&app.profile_as(&app.admin_token).await, 200); // other users keep their sessions
}
