// Package crdgen generates a Kubernetes CustomResourceDefinition
// (apiextensions.k8s.io/v1) from a CUE definition, so that the schema users
// vet their objects against with CUE and the schema the API server enforces
// are one.
//
// The value constraints come from cuelang.org/go/encoding/openapi with
// ExpandReferences (on each struct of at most maxEncodeFields fields in
// all, since the encoder's cost grows faster than the value; larger
// structs are encoded field by field); the structure (types, properties, items, maps, open and
// closed structs, required fields and defaults) is read from the CUE value
// itself, and the result is made a structural schema as the API server
// requires it. CUE maps to the schema as follows:
//
//   - bool, string, bytes, int, float/number: boolean, string, string with
//     format byte, integer, number; int | string: x-kubernetes-int-or-string;
//     _ or any other mix of kinds: x-kubernetes-preserve-unknown-fields
//     without a type; null | T: T with nullable.
//   - "a" | "b" (also through definitions): enum; *x: default; a regular
//     field with a concrete scalar or list value: that value as default.
//   - >=, <=, >, <: minimum, maximum, exclusiveMinimum/Maximum; =~: pattern;
//     !~: not pattern; strings.MinRunes/MaxRunes: minLength/maxLength;
//     list.MinItems/MaxItems: minItems/maxItems; list.UniqueItems on
//     scalars: x-kubernetes-list-type: set; int32, int64, time.Time:
//     formats.
//   - a closed struct: properties only; {...}, or fields next to a pattern
//     constraint: x-kubernetes-preserve-unknown-fields; [string]: T alone:
//     additionalProperties T; [...T]: items T; [a, b]: items accepting a and
//     b with minItems and maxItems 2.
//   - a!: required; a: T without a default: required, unless T is a struct
//     that may be empty; a regular struct field with defaults inside:
//     default {} so that the API server fills them in as CUE does.
//   - a disjunction of structs or lists: the merge of their schemas, with
//     the encoder's oneOf of required fields as anyOf.
//   - the top-level metadata becomes {type: object}; apiVersion and kind
//     plain strings.
//
// Inside allOf, anyOf and not only value validations remain; oneOf becomes
// anyOf (a CUE disjunction accepts a value that matches several disjuncts);
// a not or anyOf that cannot be kept whole is dropped. Whatever the encoder
// cannot express (time.Duration, json.Valid, strings.HasPrefix, != on
// strings, comprehensions, cross-field rules with error()) is dropped and
// the type is kept, so the CRD is never stricter than the definition, with
// one exception the API server forces: an enum is not nullable, so a null
// there is dropped by the server instead of kept. Defaults the server would
// reject are dropped, and a recursive definition preserves unknown fields
// where CUE stops expanding it.
package crdgen
