// Package sspoperator is converge's SSP operator, the counterpart of
// kubevirt/ssp-operator: a thin package on operators/operand. For the SSP
// (ssp.kubevirt.io/v1beta3, namespaced; one per cluster, as ssp-operator
// allows) marked converge.dev/operator: native it derives components/ssp
// #Roles — the golden images namespace kubevirt-os-images with its
// os-images.kubevirt.io:view Role and RoleBinding, the
// os-images.kubevirt.io:edit ClusterRole, and one DataImportCron per
// spec.commonTemplates.dataImportCronTemplates entry (in the template's
// namespace, else kubevirt-os-images), as ssp-operator's data-sources
// operand, and, where template.openshift.io/v1 Templates are served
// (OpenShift), the common templates of the pinned bundle in
// spec.commonTemplates.namespace, as its common-templates operand —
// applies them, prunes what leaves, and writes the CR's status
// in the controller-lifecycle-operator-sdk fields SSPStatus embeds
// (Available, Progressing, Degraded; observedGeneration; phase,
// operatorVersion, targetVersion, observedVersion). The DataImportCrons
// are then CDI's to run (operators/cdi/dataimportcron, a CDI role).
//
// It gates one converge-controller role on a native SSP:
// RoleTemplateValidator, ssp-operator's virt-template-validator, served by
// converge-controller's webhook server (operators/ssp/templatevalidator);
// converge-controller --template-validator=false leaves it out.
//
// The SSP's fields (ssp-operator api/v1beta3 SSPSpec, as HCO derives
// them, components/ssp):
//
//	field                                     converge
//	----------------------------------------  -----------------------------------------------------------
//	commonTemplates.dataImportCronTemplates   honoured: one DataImportCron each; a template without
//	                                          metadata.name or spec, or naming the same cron as an earlier
//	                                          one, refused
//	templateValidator                         without effect: the validator is the RoleTemplateValidator
//	                                          role, run while the SSP exists; replicas and placement do
//	                                          not apply (converge-controller serves it)
//	tokenGenerationService.enabled            refused: converge runs no vm-console-proxy
//	commonTemplates.namespace                 honoured where the Template API is served: the common
//	                                          templates go there (Inputs, components/ssp #CommonTemplates)
//	enableMultipleArchitectures, cluster      honoured for the common templates (their architectures);
//	                                          HCO already filters the DataImportCronTemplates by
//	                                          architecture (components/ssp #DataImportCronTemplates)
//	tektonTasks, tektonPipelines, featureGates without effect: ignored by ssp-operator since v0.20.0
//	tlsSecurityProfile                        not used: the validator is served with converge-controller's
//	                                          webhook TLS settings
//
// A refused field makes the CR Degraded (reason UnsupportedConfiguration)
// and nothing is applied until it changes; what ran before keeps running.
// The roles have no workload, so the SSP is Available once they are
// applied; the DataImportCrons' own progress shows in their status and
// their DataSources' Ready condition, not in the SSP's.
package sspoperator
