// Package htmlreport renders a widetp report (README, "Reading a report": the JSON of
// `widetp run --json`, `widetp explain --json` and a run's report.json) as one self-contained
// HTML page: a picture of the deployment drawn as SVG — hosts grouped by the replicas they serve,
// every process in its host coloured by the Mooncake DP index it uses and outlined by its
// replica's global DP index, lookup clients joined to the server that answered them, crashes
// and failed barriers marked and said in words — then the violations by kind, the processes with
// filters, the replicas, the timings and links to the run's artifacts.
//
// The page loads nothing: its CSS, script and SVG are inline, a Content-Security-Policy forbids
// any request, and every string of the report is escaped, so it can be opened offline, mailed or
// kept as a CI artifact. The picture reads only report.Process records and violations (the same
// the checks read), grouping replicas with check.Replicas.
package htmlreport
