package webhooks

// DescribeSendError exposes the deliveries-log wording of a transport failure to the specs.
var DescribeSendError = describeSendError
