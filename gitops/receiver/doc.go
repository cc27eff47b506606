// Package receiver turns Git push webhooks into an immediate reconcile of
// one Sync: the role of Flux's notification-controller Receiver
// (fluxcd/notification-controller internal/server/receiver_handlers.go),
// built into converge-controller and addressed by the Sync itself.
//
// # Route
//
// A Sync with spec.receiver is addressed at POST /hook/<digest>, where
// <digest> is the lower-case hex SHA-256 of its token, name and namespace
// concatenated (Path), Flux's Receiver formula. spec.receiver.secretRef
// names a Secret in the Sync's namespace whose key "token" is the shared
// secret, used byte for byte (no trimming), as Flux's Receiver token. The
// Sync controller reads the Secret on every reconcile, keeps the path and
// the token in an Index and publishes the path in the Sync's
// status.webhookPath; a rotated token (the controller watches the
// Secret's metadata) moves the path at the next reconcile. Mount the
// Handler on the prefix:
//
//	idx := &receiver.Index{}                  // also given to the Sync controller
//	mux.Handle(receiver.PathPrefix, &receiver.Handler{Index: idx, Reader: mgr.GetClient(), Trigger: enqueue})
//
// The path is not a secret to whoever may read the Sync, but it cannot be
// guessed without the token. The former path /hook/<namespace>/<name> is
// an unknown path like any other.
//
// # Order of the checks
//
// A request is authenticated before anything is read for it: the Handler
// looks the path up in the Index (memory) and checks the signature or
// token against the indexed token; only an authenticated request reads
// its Sync, from the controller's cache. A request costs no API call
// whatever it is. Up to authentication the answer does not depend on the
// path: 405 with "Allow: POST" for another method, 413 for a body larger
// than Handler.MaxBodyBytes (DefaultMaxBodyBytes, 1 MiB; GitHub caps
// payloads at 25 MB but push payloads are far smaller), and for an
// unknown path and for a missing or wrong signature or token the same
// 404 as http.NotFound (the body "404 page not found"). Flux answers 404
// for an unknown path and 401 for a bad signature; the digest being
// unguessable that 401 would tell little, but one answer for both tells
// nothing. The controller log says why a request at a known path was
// refused.
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
// A missing or wrong signature or token triggers nothing (404, above).
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
// Errors after authentication: 404 (as above) when the Sync is no longer
// in the cache, no longer has spec.receiver or is being deleted (the
// Index follows the next reconcile); 500 when the Sync cannot be read
// (the details are logged, not sent).
package receiver
