// Package receiver turns Git push webhooks into an immediate reconcile of
// one Sync: the role of Flux's notification-controller Receiver
// (fluxcd/notification-controller internal/server/receiver_handlers.go),
// built into converge-controller and addressed by the Sync itself.
//
// # Route
//
// POST /hook/<namespace>/<name> (Path gives it) addresses the Sync
// <namespace>/<name>. The Sync must exist and have spec.receiver; its
// spec.receiver.secretRef names a Secret in the Sync's namespace whose key
// "token" is the shared secret, used byte for byte (no trimming), as
// Flux's Receiver token. Mount the Handler on the prefix:
//
//	mux.Handle("/hook/", &receiver.Handler{Reader: mgr.GetAPIReader(), Trigger: enqueue})
//
// # Authentication
//
// The sender is recognised by its event header; comparisons are constant
// time (crypto/hmac.Equal, crypto/subtle.ConstantTimeCompare):
//
//   - GitHub, a request with X-GitHub-Event: X-Hub-Signature-256 must be
//     "sha256=" followed by the lower- or upper-case hex HMAC-SHA256 of the
//     raw body keyed with the token (GitHub docs, "Validating webhook
//     deliveries",
//     https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
//     The legacy SHA-1 X-Hub-Signature header is not accepted.
//   - GitLab, a request with X-Gitlab-Event: X-Gitlab-Token must equal the
//     token (GitLab docs, "Webhooks", secret token,
//     https://docs.gitlab.com/user/project/integrations/webhooks/; Flux's
//     GitLabReceiver compares the same header).
//   - Any other request (generic): X-Signature must be "<algo>=<hex HMAC of
//     the raw body keyed with the token>" with algo sha1, sha256 or sha512,
//     as Flux's generic-hmac Receiver (which calls go-github's
//     ValidateSignature on X-Signature).
//
// A missing or wrong signature or token is answered 401 and triggers
// nothing. A body larger than Handler.MaxBodyBytes (DefaultMaxBodyBytes,
// 1 MiB; GitHub caps payloads at 25 MB but push payloads are far smaller)
// is answered 413 before any signature is checked.
//
// # Events and refs
//
//   - GitHub "ping" (sent when the webhook is created): 200, no trigger.
//   - GitHub "push", GitLab "Push Hook" and "Tag Push Hook", and every
//     generic request: a push. Other GitHub and GitLab events: 202
//     "ignored: <provider> event <event>".
//
// A push's JSON body is read for "ref" only (GitHub and GitLab both send
// "refs/heads/<branch>" or "refs/tags/<tag>"; GitHub's form-encoded
// deliveries carry the JSON in the "payload" form field). A GitHub or
// GitLab push whose body is not JSON is answered 400; a generic body that
// is not a JSON object with a string "ref" triggers without a filter. The
// ref filter, against the Sync's spec.source.ref:
//
//   - branch B: a push to refs/heads/B triggers; any other ref is answered
//     202 "ignored: push to <ref>".
//   - tag or semver: a push to refs/tags/* triggers (the controller
//     resolves the tag or range); any other ref is answered 202 "ignored".
//   - commit, or no ref (the remote's default branch, unknown here): every
//     push triggers.
//
// A push to a suspended Sync (spec.suspend) is answered 202 "ignored:
// <namespace>/<name> is suspended" (Flux answers 503 for a suspended
// Receiver; here the Receiver is fine, the Sync does not want reconciles).
// A push that passes is answered 200 "reconcile of <namespace>/<name>
// requested" after Trigger returned, as Flux's Receiver answers 200.
//
// Errors: 404 "no receiver for <namespace>/<name>" when the Sync does not
// exist or has no spec.receiver (the body does not say which); 405 with
// "Allow: POST" for another method; 500 when the Sync or Secret cannot be
// read or the Secret has no non-empty "token" (the details are logged,
// not sent).
package receiver
