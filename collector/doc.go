// Package collector is the in-runtime recorder that writes one Arrow stream
// file of pipeline events per rank while a training job runs.
package collector
