package nodeendpoint

const (
	// ConsoleAddressAnnotation on a Node is the host:port its agent serves
	// VMI consoles on.
	ConsoleAddressAnnotation = "vm.converge.dev/console-address"
	// ConsoleCertSHA256Annotation on a Node is the lowercase hex SHA-256
	// of the DER bytes of the agent's console serving certificate; clients
	// accept only that certificate.
	ConsoleCertSHA256Annotation = "vm.converge.dev/console-cert-sha256"
	// ConsoleSubprotocol is the WebSocket subprotocol of a console
	// session: binary messages carry the console's bytes, in both
	// directions.
	ConsoleSubprotocol = "console.vm.converge.dev.v1"
)

// Console is the serial console endpoint of a node's VM agent
// (`converge-node vm`, nodeplane/vm/console), the job virt-handler's
// console endpoint does for `virtctl console`. A session is a WebSocket
// upgrade of GET ConsolePath with subprotocol ConsoleSubprotocol and the
// user's bearer token.
var Console = Service{
	Name:                 "console",
	Agent:                "converge-node vm",
	Serves:               "VMI consoles",
	AddressAnnotation:    ConsoleAddressAnnotation,
	CertSHA256Annotation: ConsoleCertSHA256Annotation,
}

// ConsolePath gives the URL path of the console of VMI ns/name:
// /v1/namespaces/{ns}/virtualmachineinstances/{name}/console.
func ConsolePath(ns, name string) string {
	return "/v1/namespaces/" + ns + "/virtualmachineinstances/" + name + "/console"
}
