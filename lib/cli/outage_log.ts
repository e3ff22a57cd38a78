/**
 * A log that says an outage in a few lines instead of a line per failed request: while a host
 * fails every request (two or more since its last answer), the lines about retrying its requests
 * are not shown; the host's breaker says when it went down, every while it stays so, and when it
 * answers again (`outageLine`). The first failure of a run still shows: a blip is one line.
 *
 * @module
 */

/** What the log needs of the process's breaker. */
export interface FailingHosts {
  /** The hosts that failed every request since their last answer, `atLeast` times. */
  failingHosts(atLeast?: number): string[];
}

/**
 * `log`, less the lines about retrying a request of a host that is failing now (its first
 * failure's line still shows). Other lines go through as they are.
 */
export function quietWhileFailing(
  log: (line: string) => void,
  breaker: FailingHosts,
): (line: string) => void {
  return (line) => {
    if (/retrying|attempts\)/.test(line)) {
      const hosts = breaker.failingHosts(2);
      if (hosts.some((h) => line.includes(h))) return;
    }
    log(line);
  };
}
