package endpoint

import "fmt"

// Refusal is a node server's refusal of a request: the HTTP status to
// answer and the one-line reason, which the server writes as the body.
type Refusal struct {
	// Code is the HTTP status code, e.g. 401, 403, 409.
	Code int
	// Message is the reason, naming the object refused.
	Message string
}

// Error gives Message.
func (e *Refusal) Error() string { return e.Message }

// Refuse gives a Refusal with code and the message fmt.Sprintf(format,
// args...).
func Refuse(code int, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...)}
}
