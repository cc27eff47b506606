package guestimage

import (
	"github.com/converge-dev/converge/nodeplane/vm/vmdisks"
)

// NoCloudLabel is the volume label of a NoCloud disk (cloud-init's
// NoCloud datasource): vmdisks.NoCloudLabel.
const NoCloudLabel = vmdisks.NoCloudLabel

// NoCloudISO writes to path the NoCloud disk the VM agent makes
// (vmdisks.WriteISO: ISO 9660 with Rock Ridge and Joliet names, labelled
// NoCloudLabel) holding /user-data and /meta-data with the bodies given,
// so a guest booted outside the agent reads the same disk.
func NoCloudISO(path, userData, metaData string) error {
	return vmdisks.WriteISO(path, NoCloudLabel, map[string][]byte{"user-data": []byte(userData), "meta-data": []byte(metaData)})
}
