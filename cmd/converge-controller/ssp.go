package main

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/webhook"
	"github.com/converge-dev/converge/operators/operand"
	"github.com/converge-dev/converge/operators/ssp/sspoperator"
)

// setupSSPOperator adds the SSP operator (operators/ssp/sspoperator) to
// mgr with oo: the golden images namespace and the DataImportCrons of a
// native SSP, and, when templateValidator and the webhook server runs
// (webhooks not nil), the template validator gated on a native SSP.
func setupSSPOperator(mgr ctrl.Manager, engine *graph.Engine, oo operand.Options, templateValidator bool, webhooks *webhook.Registrar) error {
	if templateValidator && webhooks == nil {
		ctrl.Log.Info("template validator not served: it needs the webhook server (--webhook-service-name/--webhook-service-namespace or --webhook-url)")
		templateValidator = false
	}
	return sspoperator.Setup(mgr, engine, sspoperator.Options{Operand: oo, TemplateValidator: templateValidator, Webhooks: webhooks})
}
