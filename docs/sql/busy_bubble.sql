-- busy_bubble.sql: per-stage busy time and the bubble of every (step,
-- pipeline) window, from the Parquet export (ppprof export --parquet DIR),
-- as analyze defines them (DESIGN.md "The numbers, defined"):
--
--   window T    first start to last end of the window's F, B, W and P2P ops;
--               complete when every op of the window (any kind) ended
--   busy_i      union of stage i's F/B/W intervals over its TP ranks
--   bubble      1 - max_i(busy_i) / T
--   overall     1 - sum(max busy) / sum(T) over the complete windows
--               (analyze's utilization.bubble)
--
-- DuckDB: set the export directory first, then run the file:
--   SET VARIABLE ppprof_dir = 'DIR';
-- A fleet job's export can be many times what one query holds in memory:
-- query one step by naming its directory,
--   SET VARIABLE ppprof_dir = 'DIR/step=97';
-- or a range of steps with either or both of
--   SET VARIABLE ppprof_first_step = 96;
--   SET VARIABLE ppprof_last_step = 97;
-- (the other steps' files are not read, but DuckDB lists every file of
-- DIR first: seconds for a few thousand, a minute or more for a fleet
-- job's hundreds of thousands). It returns one row per (step, pipeline,
-- stage), with the window's numbers repeated on each, and the overall
-- bubble, over the steps queried, on every row.

WITH ev AS (
    SELECT step, pipeline, stage, kind, start_ns, end_ns
    FROM read_parquet(getvariable('ppprof_dir') || '/**/*.parquet', hive_partitioning = true)
    WHERE step BETWEEN coalesce(getvariable('ppprof_first_step'), -9223372036854775808)
                   AND coalesce(getvariable('ppprof_last_step'), 9223372036854775807)
),
windows AS (
    SELECT step, pipeline,
           min(start_ns) FILTER (WHERE kind IN ('F', 'B', 'W', 'SEND_F', 'RECV_F', 'SEND_B', 'RECV_B') AND end_ns IS NOT NULL) AS start_ns,
           max(end_ns)   FILTER (WHERE kind IN ('F', 'B', 'W', 'SEND_F', 'RECV_F', 'SEND_B', 'RECV_B')) AS end_ns,
           bool_and(end_ns IS NOT NULL) AS complete
    FROM ev
    GROUP BY step, pipeline
),
compute AS (
    SELECT step, pipeline, stage, start_ns AS s, end_ns AS e
    FROM ev
    WHERE kind IN ('F', 'B', 'W') AND start_ns IS NOT NULL AND end_ns IS NOT NULL
),
-- Gaps and islands: an interval starts a new island when it starts after
-- every earlier one (by start) has ended; touching intervals join.
marked AS (
    SELECT *, max(e) OVER (PARTITION BY step, pipeline, stage ORDER BY s, e
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM compute
),
islands AS (
    SELECT step, pipeline, stage, s, e,
           sum(CASE WHEN reach IS NULL OR s > reach THEN 1 ELSE 0 END)
               OVER (PARTITION BY step, pipeline, stage ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island
    FROM marked
),
stages AS (
    SELECT DISTINCT stage FROM ev
),
busy AS (
    SELECT w.step, w.pipeline, st.stage, coalesce(sum(i.e - i.s), 0)::BIGINT AS busy_ns
    FROM windows w
    CROSS JOIN stages st
    LEFT JOIN (
        SELECT step, pipeline, stage, island, min(s) AS s, max(e) AS e
        FROM islands GROUP BY step, pipeline, stage, island
    ) i ON i.step = w.step AND i.pipeline = w.pipeline AND i.stage = st.stage
    GROUP BY w.step, w.pipeline, st.stage
),
per_window AS (
    SELECT w.step, w.pipeline, w.start_ns, w.end_ns, w.complete,
           (w.end_ns - w.start_ns) AS window_ns,
           max(b.busy_ns) AS max_busy_ns
    FROM windows w JOIN busy b USING (step, pipeline)
    GROUP BY ALL
),
overall AS (
    SELECT 1 - sum(max_busy_ns)::DOUBLE / sum(window_ns)::DOUBLE AS bubble
    FROM per_window
    WHERE complete AND window_ns > 0
)
SELECT b.step, b.pipeline, b.stage,
       b.busy_ns,
       b.busy_ns / 1e6 AS busy_ms,
       w.start_ns, w.end_ns, w.window_ns, w.complete,
       CASE WHEN w.window_ns > 0 THEN 1 - w.max_busy_ns::DOUBLE / w.window_ns::DOUBLE END AS bubble,
       o.bubble AS overall_bubble
FROM busy b
JOIN per_window w USING (step, pipeline)
CROSS JOIN overall o
ORDER BY b.step, b.pipeline, b.stage;
