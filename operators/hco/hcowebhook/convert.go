package hcowebhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/converge-dev/converge/internal/graph"
)

// ConvertPath is the server path of the HyperConverged conversion webhook
// (HCO's CSV registers its conversion at /convert too).
const ConvertPath = "/convert"

// maxReviewBytes bounds a ConversionReview body (the API server sends at
// most a list page of objects).
const maxReviewBytes = 32 << 20

// Converter is the CRD conversion webhook of HyperConverged: an
// http.Handler that takes an apiextensions.k8s.io/v1 ConversionReview and
// answers it with every object converted to desiredAPIVersion by
// graph.Engine.ConvertHyperConverged (the schema's #ToV1 / #ToV1Beta1, as
// HCO api/v1beta1/conversion.go). One object that cannot be converted
// fails the whole review, with the object named in the message, as the API
// server expects. Webhook serves it at ConvertPath.
type Converter struct {
	Engine *graph.Engine
}

// ServeHTTP implements http.Handler.
func (c *Converter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	review := &apiextensionsv1.ConversionReview{}
	if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("want a ConversionReview with a request: %v", err), http.StatusBadRequest)
		return
	}
	review.Response = c.convert(review.Request)
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

func (c *Converter) convert(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID}
	for _, raw := range req.Objects {
		var obj map[string]any
		if err := json.Unmarshal(raw.Raw, &obj); err != nil {
			resp.Result = failure(err)
			return resp
		}
		out, err := c.Engine.ConvertHyperConverged(obj, req.DesiredAPIVersion)
		if err != nil {
			resp.Result = failure(err)
			return resp
		}
		b, err := json.Marshal(out)
		if err != nil {
			resp.Result = failure(err)
			return resp
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}

func failure(err error) metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
}
