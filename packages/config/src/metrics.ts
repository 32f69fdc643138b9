// Settings the API's and the worker's Prometheus metrics share.

/**
 * How often the processes' default metrics sample their event-loop delay (prom-client's eventLoopMonitoringPrecision,
 * 10 ms by default). Its timer wakes an idle process on every sample: at 10 ms an idle API or worker spent 14 ms of
 * CPU a second on it (1.8 ms without), and on a busy machine each wake-up also takes a core from the processes
 * doing the work. 100 ms still samples a scrape interval hundreds of times.
 */
export const EVENT_LOOP_MONITORING_PRECISION_MS = 100;
