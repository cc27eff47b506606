package webhook

import (
	"encoding/json"

	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// RequestName takes an admission request and gives the name of its object
// for messages: the name, or, for a CREATE with generateName (the API
// server names the object after admission), the prefix followed by "*".
func RequestName(req ctrladmission.Request) string {
	if req.Name != "" {
		return req.Name
	}
	var meta struct {
		Metadata struct {
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(req.Object.Raw, &meta)
	return meta.Metadata.GenerateName + "*"
}
