-- A projection's checkpoint compare-and-set fails when it is refused (issue #33). The calendar sends
-- its batch's writes and its COMMIT in one pipeline after the compare-and-set; a refusal that only
-- returned no row would let that COMMIT run. The statement (checkpoint.advanceSQL) now calls
-- bl_checkpoint_moved when it moved no row, which raises BL004; every statement after it in the
-- pipeline is skipped, the COMMIT with them, and the transaction is rolled back.
--
--   BL004  the checkpoint is not where the runner believes it is (another runner moved it)
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION bl_checkpoint_moved(projection text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'BL004',
        MESSAGE = format('checkpoint of projection %s moved', projection);
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION bl_checkpoint_moved(text);
