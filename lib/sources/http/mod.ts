/**
 * The HTTP client every source sends through (`http.ts`: timeouts, retries with backoff, redirects
 * kept to allowed origins; bodies read within byte bounds, `body_read.ts`), the pacer that keeps a process's
 * requests to each host at a pace the host takes (`host_pacer.ts`) and pauses a host that answers
 * nothing (`host_breaker.ts`), and the headers sent with them
 * (`request_headers.ts`: the user agent, and credentials kept to their own host).
 *
 * @module
 */
export { type HttpAnswer, HttpClient, type HttpOptions, networkCause } from "./http.ts";
export {
  BODY_BYTES_IN_FLIGHT,
  largeAnswers,
  SLOW_BODY,
  SlowBodyError,
  TooLargeError,
} from "./body_read.ts";
export {
  type HostPace,
  type PaceOutcome,
  Pacer,
  type PacerOptions,
  type PaceState,
} from "./host_pacer.ts";
export {
  type BreakerOutcome,
  HostBreaker,
  type HostBreakerOptions,
  type HostOutage,
  type HostPause,
  HostPausedError,
  outageLine,
  pauseLine,
} from "./host_breaker.ts";
export { parseHeader, type RequestHeader, USER_AGENT } from "./request_headers.ts";
